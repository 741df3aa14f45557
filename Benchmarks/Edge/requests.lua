-- wrk script of run.sh: GET $EDGE_PATH with `Authorization: Bearer <token>`, the 64 accounts' tokens in turn
-- (one per line in $EDGE_TOKENS). The route without the middleware gets the same header and ignores it, so both
-- routes parse the same requests. Each request is formatted once, at start; done() prints one machine line.
local tokens = {}
for line in io.lines(os.getenv("EDGE_TOKENS")) do
    if #line > 0 then tokens[#tokens + 1] = line end
end
local requests = {}
for i, token in ipairs(tokens) do
    requests[i] = wrk.format("GET", os.getenv("EDGE_PATH"), { ["Authorization"] = "Bearer " .. token })
end
local index = 0

function request()
    index = index % #requests + 1
    return requests[index]
end

function done(summary, latency, _)
    local errors = summary.errors
    io.write(string.format("EDGE requests=%d rps=%.1f p50=%d p99=%d bad=%d\n",
        summary.requests, summary.requests / summary.duration * 1e6,
        latency:percentile(50), latency:percentile(99),
        errors.connect + errors.read + errors.write + errors.status + errors.timeout))
end
