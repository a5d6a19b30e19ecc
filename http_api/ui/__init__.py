"""The people's page, `GET /api/ui`: an approvals inbox, a live run view, a small chat and workflow runs.

Static files shipped in this folder (no build step, no CDN); they talk to the same HTTP API as every client.
"""
