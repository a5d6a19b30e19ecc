"""The workflows this app serves. Each module defines `WorkflowDefinition`s at module level; all are loaded and
checked at start-up (`workflow_runtime.registry`). Add a module here to serve a new workflow; see
`workflow_runtime.definition` for the steps."""
