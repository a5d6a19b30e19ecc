"""The anchor benchmark: Microsoft's AgentFunctionApp (this directory is its Functions app) vs this app."""
