// App Service Authentication (optional: app.bicep deploys this module when enableAppServiceAuth). Validates Entra ID
// bearer tokens issued for `clientId`; the approver's name then comes from X-MS-CLIENT-PRINCIPAL-NAME. No client
// secret: tokens are validated here, never issued. /api/health stays anonymous.
param functionAppName string
param clientId string

resource functionApp 'Microsoft.Web/sites@2024-04-01' existing = {
  name: functionAppName
}

resource authSettings 'Microsoft.Web/sites/config@2024-04-01' = {
  #checkov:skip=CKV_AZURE_13:This resource is the authentication configuration itself (checkov reads it as a site)
  #checkov:skip=CKV_AZURE_63:Not a site (its authentication configuration); logs go to Application Insights
  #checkov:skip=CKV_AZURE_65:Not a site (its authentication configuration); logs go to Application Insights
  #checkov:skip=CKV_AZURE_66:Not a site (its authentication configuration); logs go to Application Insights
  #checkov:skip=CKV_AZURE_80:Not a site (its authentication configuration); the app is Python, no .NET Framework
  #checkov:skip=CKV_AZURE_88:Not a site (its authentication configuration); Flex Consumption has no Azure Files mount
  #checkov:skip=CKV_AZURE_222:Not a site (its authentication configuration); see the site's own skip
  parent: functionApp
  name: 'authsettingsV2'
  properties: {
    platform: { enabled: true }
    globalValidation: {
      requireAuthentication: true
      unauthenticatedClientAction: 'Return401'
      excludedPaths: [ '/api/health' ]
    }
    identityProviders: {
      azureActiveDirectory: {
        enabled: true
        registration: {
          clientId: clientId
          openIdIssuer: 'https://sts.windows.net/${subscription().tenantId}/v2.0'
        }
        validation: {
          allowedAudiences: [ 'api://${clientId}', clientId ]
        }
      }
    }
  }
}
