"use strict";
/*
 * Starts the local Cosmos DB server (@vercel/cosmosdb-server + compat.js) on 127.0.0.1 with keep-alive.
 *   node cosmos_local/launcher.js [--port N]      (default 0: a free port)
 * Prints one line `COSMOS_LOCAL_READY https://127.0.0.1:PORT/` once listening, and exits when its stdin closes
 * (so a parent that dies never leaves an orphan) or on SIGTERM/SIGINT. State is in memory: a restart is empty.
 */

const compat = require("./compat"); // must load before the package: it patches handlers routes.js picks up
const { createHttpsServer } = require("@vercel/cosmosdb-server");

const portArg = process.argv.indexOf("--port");
const port = portArg > 0 ? Number(process.argv[portArg + 1]) : 0;

const server = createHttpsServer({ keepAlive: true });
// Keep connections open between requests: the stock CLI closes each one and every request pays a TLS handshake.
server.keepAliveTimeout = 60_000;
server.headersTimeout = 65_000;
compat.installControlRoutes(server);

let stopping = false;
function stop() {
  if (stopping) return;
  stopping = true;
  server.close(() => process.exit(0));
  server.closeAllConnections();
  setTimeout(() => process.exit(0), 2_000).unref();
}

server.on("error", (err) => {
  process.stderr.write(`cosmos_local: ${err.message}\n`);
  process.exit(1);
});
server.listen(port, "127.0.0.1", () => {
  process.stdout.write(`COSMOS_LOCAL_READY https://127.0.0.1:${server.address().port}/\n`);
});

process.stdin.on("end", stop);
process.stdin.on("close", stop);
process.stdin.resume();
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
