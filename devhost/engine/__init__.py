"""The devhost Durable runtime: SQLite store, scheduler, clocks, fault injection. Public surface: `engine.api`."""
