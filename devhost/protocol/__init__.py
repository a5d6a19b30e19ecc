"""Sans-IO Durable Functions protocol core: history events, trigger JSON, SDK output parsing, C# action replay."""
