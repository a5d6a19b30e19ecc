// App Service Authentication (optional: app.bicep deploys this module when enableAppServiceAuth). Validates Entra ID
// bearer tokens issued for `clientId` and sign-in sessions, and strips any X-MS-CLIENT-PRINCIPAL* header a client
// sends; the caller then comes from X-MS-CLIENT-PRINCIPAL. No client secret: tokens are validated here, never issued.
// Unauthenticated requests reach the app, which answers 401 on every route that needs a caller (AUTH_MODE=easyauth)
// and serves its public routes: health, the OpenAPI document, the page (which sends people to /.auth/login itself),
// signed decision links, and Slack's signed button clicks. Requiring authentication here refused all of those: the
// page and the decision links answered 401 before they could send anyone to sign in, and Slack's clicks never arrived.
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
      requireAuthentication: false
      unauthenticatedClientAction: 'AllowAnonymous'
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
