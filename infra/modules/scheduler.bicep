// The Durable Task Scheduler (the default Durable backend): a scheduler, its task hub, and "Durable Task Data
// Contributor" for the app's identity on the scheduler (the role the Functions host needs as client and worker).
param location string
param tags object
param name string
param taskHubName string
@allowed([ 'Consumption', 'Dedicated' ])
param sku string
param capacity int
param principalId string

var durableTaskDataContributor = '0ad04412-c4d5-4796-b79c-f76d14c8d402'

resource scheduler 'Microsoft.DurableTask/schedulers@2025-11-01' = {
  name: name
  location: location
  tags: tags
  properties: {
    // An empty list denies every caller; access is still Entra ID + the role below.
    ipAllowlist: [ '0.0.0.0/0' ]
    sku: sku == 'Dedicated' ? { name: 'Dedicated', capacity: capacity } : { name: 'Consumption' }
  }
}

resource taskHub 'Microsoft.DurableTask/schedulers/taskHubs@2025-11-01' = {
  parent: scheduler
  name: taskHubName
}

resource contributor 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(scheduler.id, principalId, durableTaskDataContributor)
  scope: scheduler
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', durableTaskDataContributor)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}

output endpoint string = scheduler.properties.endpoint
output taskHubName string = taskHub.name
