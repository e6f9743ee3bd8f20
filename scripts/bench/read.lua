-- wrk script for scripts/bench_gateway.py: one MCP request per call, with exactly the headers and
-- body an SDK 2.3 client sends. env: MCP_WIRE (2026-07-28 | 2025-11-25), MCP_METHOD
-- (resources/read | resources/templates/list), MCP_URIS (space-separated; one picked per request),
-- TOKEN (bearer, optional).
local wire = os.getenv("MCP_WIRE") or "2026-07-28"
local method = os.getenv("MCP_METHOD") or "resources/read"
local token = os.getenv("TOKEN")
local uris = {}
for uri in string.gmatch(os.getenv("MCP_URIS") or "perf://doc/1", "%S+") do uris[#uris + 1] = uri end
local meta = '"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",' ..
  '"io.modelcontextprotocol/clientInfo":{"name":"wrk","version":"0"},' ..
  '"io.modelcontextprotocol/clientCapabilities":{}}'

request = function()
  local headers = {
    ["Content-Type"] = "application/json",
    ["Accept"] = "application/json, text/event-stream",
    ["MCP-Protocol-Version"] = wire,
  }
  if token then headers["Authorization"] = "Bearer " .. token end
  local params = {}
  if method == "resources/read" then
    local uri = uris[math.random(#uris)]
    params[#params + 1] = '"uri":"' .. uri .. '"'
    if wire == "2026-07-28" then headers["Mcp-Name"] = uri end
  end
  if wire == "2026-07-28" then
    headers["Mcp-Method"] = method
    params[#params + 1] = meta
  end
  local body = '{"jsonrpc":"2.0","id":2,"method":"' .. method .. '","params":{' ..
    table.concat(params, ",") .. '}}'
  return wrk.format("POST", nil, headers, body)
end
