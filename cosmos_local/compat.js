"use strict";
/*
 * Compatibility layer for @vercel/cosmosdb-server 1.0.1: makes the in-memory server behave like real Cosmos DB where
 * our store relies on it. Load it BEFORE the package's index (launcher.js does): it replaces handler exports that
 * lib/routes.js reads when it is first required. It hooks package internals, hence the exact version check below
 * and the compatibility test in tests/store/test_cosmos_local.py.
 *
 * Fixes (see docs/local-cosmos.md for the stock behaviour):
 *   - read of a missing item (or wrong partition key): 404 NotFound instead of a 500 TypeError;
 *   - TTL: container `defaultTtl` and item `ttl` are enforced; expired items are invisible to point reads, queries
 *     and uniqueness checks and are removed when touched (real Cosmos hides them as soon as they expire);
 *   - items over 2 MB (UTF-8 JSON) are refused with 413 RequestEntityTooLarge like a real account;
 *   - an upsert that violates a unique key answers 409 Conflict instead of 500.
 * Test hook (not a Cosmos API): POST /_compat/clock {"advanceSeconds": n} moves the server's clock forward, so TTL
 * expiry is tested without waiting. Keep-alive is set by the launcher (server option).
 */

const PINNED_VERSION = "1.0.1";
const MAX_ITEM_BYTES = 2 * 1024 * 1024;

const pkgVersion = require("@vercel/cosmosdb-server/package.json").version;
if (pkgVersion !== PINNED_VERSION) {
  throw new Error(
    `cosmos_local/compat.js was written for @vercel/cosmosdb-server ${PINNED_VERSION} but ${pkgVersion} is ` +
      "installed: re-check every fix against the new version before changing the pin"
  );
}

const lib = (name) => require(`@vercel/cosmosdb-server/lib/${name}`);
const Documents = lib("account/documents").default;
const headerPartition = lib("utils/get-partition-from-header");

// ---- a movable clock: every timestamp the server takes (_ts included) goes through Date.now ----------------------
let clockOffsetMs = 0;
const realDateNow = Date.now;
Date.now = () => realDateNow() + clockOffsetMs;
const nowSeconds = () => Date.now() / 1000;

// ---- TTL -----------------------------------------------------------------------------------------------------------
function effectiveTtl(items, data) {
  const collection = items._parent.read();
  if (!collection || collection.defaultTtl === undefined || collection.defaultTtl === null) {
    return null; // TTL disabled on the container: item ttl values are ignored, as in Cosmos
  }
  const ttl = data.ttl !== undefined && data.ttl !== null ? data.ttl : collection.defaultTtl;
  return ttl === -1 ? null : ttl;
}

function isExpired(items, data) {
  const ttl = effectiveTtl(items, data);
  return ttl !== null && nowSeconds() >= data._ts + ttl;
}

// Removes an item the way Items.delete does, without going through the (patched) lookup.
function purge(items, data) {
  const partition = items._getPartition(data);
  for (const keyPath of items._uniqueKeyPaths) {
    const value = keyPath
      .slice(1)
      .split("/")
      .reduce((v, k) => (v === undefined || v === null ? undefined : v[k]), data);
    items._index.delete(items._getId(keyPath, value, partition));
  }
  items._data.delete(data._rid);
}

function purgeExpired(items) {
  const collection = items._parent.read();
  if (!collection || collection.defaultTtl === undefined || collection.defaultTtl === null) return;
  for (const item of [...items._data.values()]) {
    const data = item.read();
    if (data && isExpired(items, data)) purge(items, data);
  }
}

const originalItem = Documents.prototype._item;
Documents.prototype._item = function itemUnlessExpired(keyPath, value, partition) {
  const item = originalItem.call(this, keyPath, value, partition);
  const data = item.read();
  if (data && isExpired(this, data)) {
    purge(this, data);
    return originalItem.call(this, keyPath, value, partition);
  }
  return item;
};

for (const method of ["query", "read"]) {
  const original = Documents.prototype[method];
  Documents.prototype[method] = function withoutExpired(...args) {
    purgeExpired(this);
    return original.apply(this, args);
  };
}

// ---- the 2 MB item limit ---------------------------------------------------------------------------------------------
function tooLarge(data) {
  const size = Buffer.byteLength(JSON.stringify(data), "utf8");
  if (size <= MAX_ITEM_BYTES) return null;
  const err = new Error(`Request size is too large: the item is ${size} bytes, the limit is ${MAX_ITEM_BYTES}.`);
  err.requestEntityTooLarge = true;
  return err;
}

for (const method of ["create", "replace"]) {
  const original = Documents.prototype[method];
  Documents.prototype[method] = function withinSizeLimit(data, ...rest) {
    const err = tooLarge(data);
    if (err) throw err;
    return original.call(this, data, ...rest);
  };
}

// Write handlers: errors the storage layer flags become their HTTP status instead of a 500 (stock upsert does not
// map a unique-key conflict to 409, and nothing maps the size limit).
const FLAGGED_ERRORS = [
  ["requestEntityTooLarge", 413, "RequestEntityTooLarge"],
  ["conflict", 409, "Conflict"],
  ["badRequest", 400, "BadRequest"],
];

function mapFlaggedErrors(handlerName) {
  const mod = lib(`handler/${handlerName}`);
  const original = mod.default;
  mod.default = async (account, req, res, params) => {
    try {
      return await original(account, req, res, params);
    } catch (err) {
      const match = FLAGGED_ERRORS.find(([flag]) => err[flag]);
      if (!match) throw err;
      res.statusCode = match[1];
      return { code: match[2], message: err.message };
    }
  };
}
["create-document", "upsert-document", "replace-document"].forEach(mapFlaggedErrors);

// ---- point read of a missing item -> 404 ---------------------------------------------------------------------------
const readDocument = lib("handler/read-document");
const originalRead = readDocument.default;
readDocument.default = (account, req, res, params) => {
  const collection = account.database(params.dbId).collection(params.collId);
  if (collection.read()) {
    const partition = headerPartition.parsePartitionKey(headerPartition.default(req), params.docId);
    if (!collection.document(params.docId, partition).read()) {
      res.statusCode = 404;
      return { code: "NotFound", message: "Entity with the specified id does not exist in the system." };
    }
  }
  return originalRead(account, req, res, params);
};

// ---- test-only control routes ----------------------------------------------------------------------------------------
function readJson(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      try {
        resolve(chunks.length ? JSON.parse(Buffer.concat(chunks).toString()) : {});
      } catch (err) {
        reject(err);
      }
    });
    req.on("error", reject);
  });
}

async function handleControl(req, res) {
  let status = 404;
  let body = { message: "unknown control route" };
  if (req.method === "POST" && req.url === "/_compat/clock") {
    try {
      const { advanceSeconds } = await readJson(req);
      if (typeof advanceSeconds !== "number" || !(advanceSeconds >= 0)) throw new Error("advanceSeconds >= 0 needed");
      clockOffsetMs += advanceSeconds * 1000;
      status = 200;
      body = { offsetSeconds: clockOffsetMs / 1000 };
    } catch (err) {
      status = 400;
      body = { message: err.message };
    }
  } else if (req.method === "GET" && req.url === "/_compat/info") {
    status = 200;
    body = { package: "@vercel/cosmosdb-server", version: pkgVersion, offsetSeconds: clockOffsetMs / 1000 };
  }
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

/** Route /_compat/* to the control handler and everything else to the package's handler. */
function installControlRoutes(server) {
  const [packageHandler] = server.listeners("request");
  server.removeAllListeners("request");
  server.on("request", (req, res) => {
    if (req.url.startsWith("/_compat/")) {
      handleControl(req, res).catch(() => res.destroy());
      return;
    }
    packageHandler(req, res);
  });
}

module.exports = { installControlRoutes, PINNED_VERSION, MAX_ITEM_BYTES };
