// Everything the app needs, in one resource group. No keys and no connection strings with secrets: every service is
// reached with the app's user-assigned managed identity (local/key auth is switched off where the service allows it),
// and the one secret of the app (CONTINUATION_TOKEN_SECRET) is a Key Vault reference.
param location string
param tags object
param resourceToken string
param pythonVersion string
param durableBackend string
param schedulerSku string
param schedulerCapacity int
param cosmosServerless bool
param cosmosAutoscaleMaxThroughput int
param sessionTtlSeconds int
param deployOpenAi bool
param openAiModelName string
param openAiModelVersion string
param openAiDeploymentCapacity int
param demoModel bool
param enableAppServiceAuth bool
param authClientId string
param authMode string
param allowAnonymous bool
@secure()
param continuationTokenSecret string
param maximumInstanceCount int
param httpPerInstanceConcurrency int

var useScheduler = durableBackend == 'durableTaskScheduler'
var taskHubName = 'agents'
var cosmosDatabaseName = 'agents'
var deploymentContainerName = 'app-package'

// Built-in role definition ids (https://learn.microsoft.com/azure/role-based-access-control/built-in-roles).
var roles = {
  storageBlobDataOwner: 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b'
  storageQueueDataContributor: '974c5e8b-45b9-4653-ba55-5f855dd0fb88'
  storageTableDataContributor: '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3'
  keyVaultSecretsUser: '4633458b-17de-408a-b874-0445c86b69e6'
  monitoringMetricsPublisher: '3913510d-42f4-4e42-8a64-420c390055eb'
}
// Cosmos DB data-plane built-in role "Cosmos DB Built-in Data Contributor".
var cosmosDataContributorRoleId = '00000000-0000-0000-0000-000000000002'

// ----------------------------------------------------------------------------------------------- identity

resource identity 'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31' = {
  name: 'id-${resourceToken}'
  location: location
  tags: tags
}

// ----------------------------------------------------------------------------------------------- monitoring

resource logs 'Microsoft.OperationalInsights/workspaces@2023-09-01' = {
  name: 'log-${resourceToken}'
  location: location
  tags: tags
  properties: {
    sku: { name: 'PerGB2018' }
    retentionInDays: 30
  }
}

resource appInsights 'Microsoft.Insights/components@2020-02-02' = {
  name: 'appi-${resourceToken}'
  location: location
  tags: tags
  kind: 'web'
  properties: {
    Application_Type: 'web'
    WorkspaceResourceId: logs.id
    DisableLocalAuth: true // telemetry only with Entra ID (the identity below): the connection string is no credential
  }
}

resource metricsPublisher 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(appInsights.id, identity.id, roles.monitoringMetricsPublisher)
  scope: appInsights
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.monitoringMetricsPublisher)
    principalId: identity.properties.principalId
    principalType: 'ServicePrincipal'
  }
}

// ----------------------------------------------------------------------------------------------- storage (host)

// AzureWebJobsStorage (host leases and keys; with the azureStorage backend also the Durable queues and tables) and the
// Flex Consumption deployment container. Shared keys are off: identity-based connections only.
resource storage 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  #checkov:skip=CKV_AZURE_35:Network rules allow all: Flex Consumption without a VNet reaches the account over its public endpoint; shared keys are off, access is Entra ID + RBAC only
  #checkov:skip=CKV_AZURE_43:The name is 'st' + uniqueString() (13 lowercase alphanumerics), valid; the check cannot evaluate the expression
  #checkov:skip=CKV_AZURE_59:Public endpoint needed by Flex Consumption without a VNet; shared keys are off, access is Entra ID + RBAC only
  #checkov:skip=CKV_AZURE_206:Locally redundant storage on purpose: the host's leases and the deployment package are re-creatable
  name: 'st${resourceToken}'
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: { name: 'Standard_LRS' }
  properties: {
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    allowBlobPublicAccess: false
    allowSharedKeyAccess: false
    defaultToOAuthAuthentication: true
    publicNetworkAccess: 'Enabled'
    networkAcls: {
      defaultAction: 'Allow'
      bypass: 'AzureServices'
    }
  }
}

resource blobService 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' = {
  parent: storage
  name: 'default'
}

resource deploymentContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' = {
  parent: blobService
  name: deploymentContainerName
  properties: { publicAccess: 'None' }
}

resource blobOwner 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(storage.id, identity.id, roles.storageBlobDataOwner)
  scope: storage
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.storageBlobDataOwner)
    principalId: identity.properties.principalId
    principalType: 'ServicePrincipal'
  }
}

// Queues and tables only hold Durable state with the azureStorage backend: least privilege leaves them out otherwise.
resource queueContributor 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!useScheduler) {
  name: guid(storage.id, identity.id, roles.storageQueueDataContributor)
  scope: storage
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.storageQueueDataContributor)
    principalId: identity.properties.principalId
    principalType: 'ServicePrincipal'
  }
}

resource tableContributor 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!useScheduler) {
  name: guid(storage.id, identity.id, roles.storageTableDataContributor)
  scope: storage
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.storageTableDataContributor)
    principalId: identity.properties.principalId
    principalType: 'ServicePrincipal'
  }
}

// ----------------------------------------------------------------------------------------------- Durable Task Scheduler

module scheduler 'modules/scheduler.bicep' = if (useScheduler) {
  name: 'scheduler'
  params: {
    location: location
    tags: tags
    name: 'dts-${resourceToken}'
    taskHubName: taskHubName
    sku: schedulerSku
    capacity: schedulerCapacity
    principalId: identity.properties.principalId
  }
}

// ----------------------------------------------------------------------------------------------- Cosmos DB (sessions)

resource cosmos 'Microsoft.DocumentDB/databaseAccounts@2024-11-15' = {
  #checkov:skip=CKV_AZURE_99:Public endpoint needed by Flex Consumption without a VNet; local (key) auth is disabled, access is Entra ID + RBAC only
  #checkov:skip=CKV_AZURE_101:Public network access is on for the same reason as CKV_AZURE_99
  name: 'cosmos-${resourceToken}'
  location: location
  tags: tags
  kind: 'GlobalDocumentDB'
  properties: {
    databaseAccountOfferType: 'Standard'
    consistencyPolicy: { defaultConsistencyLevel: 'Session' }
    locations: [
      {
        locationName: location
        failoverPriority: 0
        isZoneRedundant: false
      }
    ]
    capabilities: cosmosServerless ? [ { name: 'EnableServerless' } ] : []
    disableLocalAuth: true
    disableKeyBasedMetadataWriteAccess: true
    minimalTlsVersion: 'Tls12'
    publicNetworkAccess: 'Enabled'
  }
}

resource database 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases@2024-11-15' = {
  parent: cosmos
  name: cosmosDatabaseName
  properties: {
    resource: { id: cosmosDatabaseName }
    options: cosmosServerless ? {} : { autoscaleSettings: { maxThroughput: cosmosAutoscaleMaxThroughput } }
  }
}

// The containers session_store/cosmos_admin.py expects (the app's identity cannot create them: data-plane roles
// have no control-plane rights). TTL on with no default (-1): items expire only when they carry `ttl`. Only the
// paths the store's queries filter or sort on are indexed (`indexed`, as in cosmos_admin.CONTAINERS): payloads are
// not, which keeps each write's RU charge down.
var containers = [
  { name: 'sessions', partitionKey: '/sessionId', uniqueKeys: [], indexed: [ { path: '/sessionId/?' }, { path: '/agent/?' }, { path: '/owner_id/?' }, { path: '/createdEpoch/?' } ] }
  { name: 'messages', partitionKey: '/sessionId', uniqueKeys: [ { paths: [ '/seq' ] } ], indexed: [ { path: '/sessionId/?' }, { path: '/seq/?' }, { path: '/run_id/?' } ] }
  { name: 'runs', partitionKey: '/sessionId', uniqueKeys: [], indexed: [ { path: '/sessionId/?' }, { path: '/ordinal/?' }, { path: '/owner_id/?' }, { path: '/status/?' }, { path: '/agent/?' }, { path: '/createdEpoch/?' }, { path: '/branched_from/?' } ] }
  { name: 'approvals', partitionKey: '/sessionId', uniqueKeys: [], indexed: [ { path: '/sessionId/?' }, { path: '/run_id/?' }, { path: '/status/?' }, { path: '/decider_keys/[]/?' }, { path: '/createdEpoch/?' } ] }
  { name: 'effects', partitionKey: '/sessionId', uniqueKeys: [], indexed: [ { path: '/sessionId/?' }, { path: '/type/?' }, { path: '/kind/?' }, { path: '/name/?' }, { path: '/index/?' } ] }
  { name: 'lookup', partitionKey: '/id', uniqueKeys: [], indexed: [] }
]

resource cosmosContainers 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers@2024-11-15' = [for container in containers: {
  parent: database
  name: container.name
  properties: {
    resource: {
      id: container.name
      partitionKey: {
        paths: [ container.partitionKey ]
        kind: 'Hash'
      }
      uniqueKeyPolicy: { uniqueKeys: container.uniqueKeys }
      indexingPolicy: {
        indexingMode: 'consistent'
        automatic: true
        includedPaths: container.indexed
        excludedPaths: [ { path: '/*' } ]
      }
      defaultTtl: -1
    }
  }
}]

resource cosmosDataContributor 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments@2024-11-15' = {
  parent: cosmos
  name: guid(cosmos.id, identity.id, cosmosDataContributorRoleId)
  properties: {
    roleDefinitionId: '${cosmos.id}/sqlRoleDefinitions/${cosmosDataContributorRoleId}'
    principalId: identity.properties.principalId
    scope: cosmos.id
  }
}

// ----------------------------------------------------------------------------------------------- Azure OpenAI (optional)

module openAi 'modules/openai.bicep' = if (deployOpenAi) {
  name: 'openai'
  params: {
    location: location
    tags: tags
    name: 'oai-${resourceToken}'
    modelName: openAiModelName
    modelVersion: openAiModelVersion
    capacity: openAiDeploymentCapacity
    principalId: identity.properties.principalId
  }
}

// ----------------------------------------------------------------------------------------------- Key Vault (token secret)

resource vault 'Microsoft.KeyVault/vaults@2023-07-01' = {
  #checkov:skip=CKV_AZURE_189:Public endpoint needed by the Key Vault reference of a Flex Consumption app without a VNet; access is Entra ID + RBAC only
  #checkov:skip=CKV_AZURE_109:Public endpoint needed by Flex Consumption without a VNet; access is Entra ID + RBAC only
  name: 'kv-${resourceToken}'
  location: location
  tags: tags
  properties: {
    tenantId: subscription().tenantId
    sku: {
      family: 'A'
      name: 'standard'
    }
    enableRbacAuthorization: true
    enableSoftDelete: true
    softDeleteRetentionInDays: 7
    enablePurgeProtection: true
    publicNetworkAccess: 'Enabled'
    networkAcls: {
      defaultAction: 'Allow'
      bypass: 'AzureServices'
    }
  }
}

resource tokenSecret 'Microsoft.KeyVault/vaults/secrets@2023-07-01' = {
  #checkov:skip=CKV_AZURE_41:No expiry: continuation-token keys rotate by listing several (comma-separated, the first signs), not by expiry
  parent: vault
  name: 'continuation-token-secret'
  properties: {
    value: continuationTokenSecret
    contentType: 'text/plain'
  }
}

resource secretsUser 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(vault.id, identity.id, roles.keyVaultSecretsUser)
  scope: vault
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.keyVaultSecretsUser)
    principalId: identity.properties.principalId
    principalType: 'ServicePrincipal'
  }
}

// ----------------------------------------------------------------------------------------------- the Function App

resource plan 'Microsoft.Web/serverfarms@2024-04-01' = {
  #checkov:skip=CKV_AZURE_225:Zone redundancy of Flex Consumption exists in some regions only; switch it on where the region offers it
  name: 'plan-${resourceToken}'
  location: location
  tags: tags
  kind: 'functionapp'
  sku: {
    name: 'FC1'
    tier: 'FlexConsumption'
  }
  properties: { reserved: true }
}

var durableSettings = useScheduler ? [
  { name: 'DURABLE_TASK_SCHEDULER_CONNECTION_STRING', value: 'Endpoint=${scheduler.outputs.endpoint};Authentication=ManagedIdentity;ClientID=${identity.properties.clientId}' }
] : [
  // host.json names the Durable Task Scheduler; these two app settings switch the host to Azure Storage.
  { name: 'AzureFunctionsJobHost__extensions__durableTask__storageProvider__type', value: 'AzureStorage' }
  { name: 'AzureFunctionsJobHost__extensions__durableTask__storageProvider__connectionStringName', value: 'AzureWebJobsStorage' }
]

var modelSettings = deployOpenAi ? [
  { name: 'AZURE_OPENAI_ENDPOINT', value: openAi.outputs.endpoint }
  { name: 'AZURE_OPENAI_DEPLOYMENT', value: openAi.outputs.deploymentName }
  { name: 'MODEL_NAME', value: openAiModelName }
] : (demoModel ? [ { name: 'MODEL_PROVIDER', value: 'scripted' } ] : [])

var ttlSettings = sessionTtlSeconds > 0 ? [ { name: 'SESSION_TTL_SECONDS', value: string(sessionTtlSeconds) } ] : []

var baseSettings = [
  { name: 'AzureWebJobsStorage__accountName', value: storage.name }
  { name: 'AzureWebJobsStorage__credential', value: 'managedidentity' }
  { name: 'AzureWebJobsStorage__clientId', value: identity.properties.clientId }
  { name: 'APPLICATIONINSIGHTS_CONNECTION_STRING', value: appInsights.properties.ConnectionString }
  { name: 'APPLICATIONINSIGHTS_AUTHENTICATION_STRING', value: 'Authorization=AAD;ClientId=${identity.properties.clientId}' }
  // DefaultAzureCredential (Cosmos DB, Azure OpenAI) picks the user-assigned identity by this id.
  { name: 'AZURE_CLIENT_ID', value: identity.properties.clientId }
  { name: 'TASKHUB_NAME', value: taskHubName }
  { name: 'COSMOS_ENDPOINT', value: cosmos.properties.documentEndpoint }
  { name: 'COSMOS_DATABASE', value: cosmosDatabaseName }
  { name: 'CONTINUATION_TOKEN_SECRET', value: '@Microsoft.KeyVault(SecretUri=${tokenSecret.properties.secretUri})' }
  { name: 'AUTH_MODE', value: authMode }
  { name: 'ALLOW_ANONYMOUS_ON_AZURE', value: string(allowAnonymous) }
]

resource functionApp 'Microsoft.Web/sites@2024-04-01' = {
  #checkov:skip=CKV_AZURE_17:Callers authenticate with function keys or Entra ID tokens (App Service Authentication), not client certificates
  #checkov:skip=CKV_AZURE_213:Flex Consumption has no App Service health check (the platform manages instances); GET /api/health serves probes
  #checkov:skip=CKV_AZURE_222:Public endpoint: clients call the API over the internet (HTTPS only, function keys or App Service Authentication)
  #checkov:skip=CKV_AZURE_212:Flex Consumption scales instances itself (maximumInstanceCount), there is no failover plan setting
  name: 'func-${resourceToken}'
  location: location
  tags: union(tags, { 'azd-service-name': 'api' })
  kind: 'functionapp,linux'
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: { '${identity.id}': {} }
  }
  properties: {
    serverFarmId: plan.id
    httpsOnly: true
    clientCertEnabled: false
    keyVaultReferenceIdentity: identity.id
    functionAppConfig: {
      deployment: {
        storage: {
          type: 'blobContainer'
          value: '${storage.properties.primaryEndpoints.blob}${deploymentContainerName}'
          authentication: {
            type: 'UserAssignedIdentity'
            userAssignedIdentityResourceId: identity.id
          }
        }
      }
      scaleAndConcurrency: {
        maximumInstanceCount: maximumInstanceCount
        instanceMemoryMB: 2048
        triggers: {
          http: { perInstanceConcurrency: httpPerInstanceConcurrency }
        }
      }
      runtime: {
        name: 'python'
        version: pythonVersion
      }
    }
    siteConfig: {
      minTlsVersion: '1.2'
      scmMinTlsVersion: '1.2'
      ftpsState: 'Disabled'
      remoteDebuggingEnabled: false
      http20Enabled: true
      appSettings: concat(baseSettings, durableSettings, modelSettings, ttlSettings)
    }
  }
  dependsOn: [
    deploymentContainer
    blobOwner
    secretsUser
    cosmosContainers
  ]
}

// Basic-auth publishing off: deployments use Entra ID (azd and Core Tools both do).
resource ftpPublishing 'Microsoft.Web/sites/basicPublishingCredentialsPolicies@2024-04-01' = {
  parent: functionApp
  name: 'ftp'
  properties: { allow: false }
}

resource scmPublishing 'Microsoft.Web/sites/basicPublishingCredentialsPolicies@2024-04-01' = {
  parent: functionApp
  name: 'scm'
  properties: { allow: false }
}

// App Service Authentication (Easy Auth): optional, and always on with AUTH_MODE=easyauth. The app trusts the principal
// headers only behind it (it refuses to start with easyauth unless the platform reports WEBSITE_AUTH_ENABLED=True).
var appServiceAuth = enableAppServiceAuth || authMode == 'easyauth'
module appAuth 'modules/appauth.bicep' = if (appServiceAuth) {
  name: 'appauth'
  params: {
    functionAppName: functionApp.name
    clientId: authClientId
  }
}

output functionAppName string = functionApp.name
output functionAppUri string = 'https://${functionApp.properties.defaultHostName}'
output keyVaultName string = vault.name
output cosmosEndpoint string = cosmos.properties.documentEndpoint
output openAiEndpoint string = deployOpenAi ? openAi.outputs.endpoint : ''
output schedulerEndpoint string = useScheduler ? scheduler.outputs.endpoint : ''
