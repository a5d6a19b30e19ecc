from agentctl.cli import main

raise SystemExit(main())
