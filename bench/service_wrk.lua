-- bench/service_wrk.lua: the wrk script of bench/service_load.py (run_wrk).
--
-- wrk runs one Lua state per thread. Thread k takes its share of the request list (one request
-- per line: METHOD<TAB>PATH<TAB>BODY<TAB>HEADER, the last empty or one header of the request's
-- own, "Name: value", such as a learner's Authorization or a browser's Cookie) and sends each
-- line once; a status other than the expected one (the script's third argument, 200 unless
-- given) is counted: delay() grants one request per
-- line and then holds the connection idle, so the run ends with nothing in flight. wrk also calls
-- request() without a grant: once on thread 0 before the run, to inspect the script (counted
-- nowhere), and when it reconnects after a connection dropped with a request unanswered; then
-- the thread resends its latest line (same client_answer_id: what a retrying client does) and
-- counts it as `resent`, one per lost request. When its share is answered a thread says so on
-- stderr and the script interrupts wrk (SIGINT), which otherwise runs for the whole -d. Times
-- come from the monotonic clock through LuaJIT's FFI, so the rate leaves out wrk's idle tail.

local ffi = require("ffi")
ffi.cdef[[
typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
int clock_gettime(int clock_id, bench_timespec *tp);
]]
local timespec = ffi.new("bench_timespec")
local function now_us()
  ffi.C.clock_gettime(1, timespec)  -- CLOCK_MONOTONIC
  return tonumber(timespec.tv_sec) * 1000000 + tonumber(timespec.tv_nsec) / 1000
end

local threads = {}
local created = 0

function setup(thread)
  thread:set("index", created)
  created = created + 1
  table.insert(threads, thread)
end

function init(args)
  local lines = {}
  for line in io.lines(args[1]) do lines[#lines + 1] = line end
  local nthreads = tonumber(args[2])
  local base, extra = math.floor(#lines / nthreads), #lines % nthreads
  local first = index * base + math.min(index, extra)
  share = base + ((index < extra) and 1 or 0)
  specs = {}
  for i = first + 1, first + share do
    local method, path, body, own = lines[i]:match("^(%u+)\t([^\t]*)\t([^\t]*)\t(.*)$")
    if body == "" then body = nil end
    local headers = nil  -- wrk.format then sends wrk.headers (the -H ones)
    if own ~= "" then  -- a table replaces wrk.headers: copy them, then add this one
      headers = {}
      for name, value in pairs(wrk.headers) do headers[name] = value end
      local name, value = own:match("^([^:]+): (.*)$")
      headers[name] = value
    end
    specs[#specs + 1] = {method, path, body, headers}
  end
  expected = tonumber(args[3] or "200")
  granted, sent, resent, received, non200 = 0, 0, 0, 0, 0
  statuses = ""  -- the statuses other than 200, space-separated
  first_us, last_us, finished = 0, 0, false
end

function delay()
  if granted >= share then return 3600000 end  -- share handed out: stay idle
  granted = granted + 1
  return 0
end

function request()
  local spec
  if sent < granted then  -- a granted request: the next line
    sent = sent + 1
    if sent == 1 then first_us = now_us() end
    spec = specs[sent]
  else  -- no grant: wrk inspecting the script, or a resend after a lost request
    if granted > 0 then resent = resent + 1 end
    spec = specs[math.max(sent, 1)]
  end
  return wrk.format(spec[1], spec[2], spec[4], spec[3])
end

function response(status, headers, body)
  received = received + 1
  last_us = now_us()
  if status ~= expected then
    non200 = non200 + 1
    statuses = statuses .. status .. " "
  end
  if not finished and sent >= share and received >= sent then
    finished = true
    io.stderr:write("bench-thread-done\n")
  end
end

function done(summary, latency, requests)
  local parts = {}
  for _, t in ipairs(threads) do
    parts[#parts + 1] = string.format(
      '{"sent": %d, "resent": %d, "received": %d, "non200": %d, "first_us": %.0f, "last_us": %.0f, "statuses": "%s"}',
      t:get("sent"), t:get("resent"), t:get("received"), t:get("non200"),
      t:get("first_us"), t:get("last_us"), t:get("statuses"))
  end
  -- wrk's timeout count is left out: it also counts the connections held idle by delay().
  local e = summary.errors
  io.write(string.format(
    'BENCH_RESULT {"p50_us": %.0f, "p99_us": %.0f, "socket_errors": %d, "threads": [%s]}\n',
    latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write, table.concat(parts, ", ")))
end
