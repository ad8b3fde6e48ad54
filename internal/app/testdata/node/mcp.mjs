// The official MCP TypeScript SDK against a running Sagacity, driven by
// internal/server TestMCPTypeScript: node mcp.mjs BASE TOKEN SAGA prints
// one JSON object of what it found.
//
// 1. Discovery, as an MCP client does on a 401: the challenge names the
//    protected-resource metadata (RFC 9728), which names the
//    authorization server, whose own metadata the SDK then reads.
// 2. Two steps of one saga, one session each (the session ended with
//    DELETE after each step), the saga named by the Sagacity-Saga-Id
//    header.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  discoverAuthorizationServerMetadata,
  discoverOAuthProtectedResourceMetadata,
  extractWWWAuthenticateParams,
} from "@modelcontextprotocol/sdk/client/auth.js";

const [base, token, saga] = process.argv.slice(2);
const mcp = new URL(base + "/mcp");
const out = {};

const refused = await fetch(mcp, {
  method: "POST",
  headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
  body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize",
    params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "probe", version: "1" } } }),
});
out.status = refused.status;
const { resourceMetadataUrl } = extractWWWAuthenticateParams(refused);
out.resourceMetadataUrl = resourceMetadataUrl?.href;
const resource = await discoverOAuthProtectedResourceMetadata(mcp, { resourceMetadataUrl });
out.resource = resource.resource;
out.authorizationServers = resource.authorization_servers ?? [];
if (out.authorizationServers.length > 0) {
  const as = await discoverAuthorizationServerMetadata(out.authorizationServers[0]);
  out.authorizationEndpoint = as?.authorization_endpoint;
}

async function step(tool, args) {
  const client = new Client({ name: "ts-per-call", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(mcp, {
    requestInit: { headers: { Authorization: "Bearer " + token, "Sagacity-Saga-Id": saga } },
  });
  await client.connect(transport);
  const r = await client.callTool({ name: tool, arguments: args });
  const version = transport.protocolVersion;
  await transport.terminateSession();
  await client.close();
  return { isError: !!r.isError, text: r.content.map((c) => c.text ?? "").join(""), structured: r.structuredContent, version };
}
out.steps = [await step("reserveInventory", { item: "desk" }), await step("createOrder", { item: "desk" })];
console.log(JSON.stringify(out));
