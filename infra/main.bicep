// Entry point for `azd up` / `azd provision`: a resource group and everything the app needs in it (app.bicep).
// Checked offline by `make check-infra` (checkov); the Bicep compiler is not part of this repository's toolchain.
targetScope = 'subscription'

@minLength(1)
@maxLength(40)
@description('azd environment name: names the resource group and seeds the resource names.')
param environmentName string

@minLength(1)
@description('Azure region of every resource.')
param location string

@allowed([ '3.11', '3.12', '3.13' ])
@description('Python of the Flex Consumption app (requirements.lock covers all three).')
param pythonVersion string = '3.12'

@allowed([ 'durableTaskScheduler', 'azureStorage' ])
@description('Durable backend: the Durable Task Scheduler (default), or Azure Storage (queues and tables of the app storage account).')
param durableBackend string = 'durableTaskScheduler'

@allowed([ 'Consumption', 'Dedicated' ])
@description('Durable Task Scheduler SKU: Consumption (pay per action) or Dedicated (capacity units, 2,000 actions/s each).')
param schedulerSku string = 'Consumption'

@minValue(1)
@description('Capacity units of a Dedicated scheduler.')
param schedulerCapacity int = 1

@description('Cosmos DB serverless (default) or provisioned autoscale throughput.')
param cosmosServerless bool = true

@minValue(1000)
@description('Autoscale maximum RU/s of the database when not serverless.')
param cosmosAutoscaleMaxThroughput int = 1000

@minValue(0)
@description('Retention of sessions in seconds (SESSION_TTL_SECONDS); 0 keeps them forever.')
param sessionTtlSeconds int = 0

@description('Create an Azure OpenAI account and model deployment the app uses through its managed identity.')
param deployOpenAi bool = true

@description('Azure OpenAI model, version and deployment capacity (thousands of tokens per minute).')
param openAiModelName string = 'gpt-4o-mini'
param openAiModelVersion string = '2024-07-18'
param openAiDeploymentCapacity int = 30

@description('Without Azure OpenAI: serve the scripted demo model on purpose (MODEL_PROVIDER=scripted). Otherwise set the model settings yourself after provisioning.')
param demoModel bool = false

@description('Put App Service Authentication (Entra ID) in front of every route but /api/health (always on with authMode easyauth).')
param enableAppServiceAuth bool = false

@description('Client (application) id of the Entra ID app registration callers get tokens for (App Service Authentication).')
param authClientId string = ''

@allowed([ 'none', 'easyauth', 'jwt' ])
@description('AUTH_MODE app setting (how the app itself authenticates callers). easyauth switches App Service Authentication on (it needs authClientId); none needs ALLOW_ANONYMOUS_ON_AZURE=true set by hand, or the app refuses to start.')
param authMode string = 'none'

@description('ALLOW_ANONYMOUS_ON_AZURE app setting: with authMode none the app starts only when this is true (one anonymous principal on purpose).')
param allowAnonymous bool = false

@secure()
@description('HMAC secret(s) of continuation tokens, stored in Key Vault; azd keeps the existing one (main.parameters.json).')
param continuationTokenSecret string

@description('Maximum instances of the Flex Consumption app.')
param maximumInstanceCount int = 100

@minValue(1)
@maxValue(1000)
@description('HTTP requests one instance serves at once. Long polls (wait_seconds) hold a slot while idle: keep it above the polls clients keep open per instance (docs/capacity.md).')
param httpPerInstanceConcurrency int = 64

var tags = { 'azd-env-name': environmentName }

resource rg 'Microsoft.Resources/resourceGroups@2024-03-01' = {
  name: 'rg-${environmentName}'
  location: location
  tags: tags
}

module app 'app.bicep' = {
  name: 'app'
  scope: rg
  params: {
    location: location
    tags: tags
    resourceToken: toLower(uniqueString(subscription().id, environmentName, location))
    pythonVersion: pythonVersion
    durableBackend: durableBackend
    schedulerSku: schedulerSku
    schedulerCapacity: schedulerCapacity
    cosmosServerless: cosmosServerless
    cosmosAutoscaleMaxThroughput: cosmosAutoscaleMaxThroughput
    sessionTtlSeconds: sessionTtlSeconds
    deployOpenAi: deployOpenAi
    openAiModelName: openAiModelName
    openAiModelVersion: openAiModelVersion
    openAiDeploymentCapacity: openAiDeploymentCapacity
    demoModel: demoModel
    enableAppServiceAuth: enableAppServiceAuth
    authClientId: authClientId
    authMode: authMode
    allowAnonymous: allowAnonymous
    continuationTokenSecret: continuationTokenSecret
    maximumInstanceCount: maximumInstanceCount
    httpPerInstanceConcurrency: httpPerInstanceConcurrency
  }
}

output AZURE_LOCATION string = location
output AZURE_RESOURCE_GROUP string = rg.name
output AZURE_FUNCTION_APP_NAME string = app.outputs.functionAppName
output SERVICE_API_NAME string = app.outputs.functionAppName
output SERVICE_API_URI string = app.outputs.functionAppUri
output AZURE_KEY_VAULT_NAME string = app.outputs.keyVaultName
output AZURE_COSMOS_ENDPOINT string = app.outputs.cosmosEndpoint
output AZURE_OPENAI_ENDPOINT string = app.outputs.openAiEndpoint
output DURABLE_TASK_SCHEDULER_ENDPOINT string = app.outputs.schedulerEndpoint
