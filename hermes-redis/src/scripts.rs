//! The Lua scripts: every change that touches more than one key is one atomic script call.

/// A script the driver runs with `EVALSHA` (loading it when the server does not have it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Script {
    /// Promote due delayed messages, return expired claims, then claim up to N messages.
    Claim,
    /// Schedule a delayed message, remembering its priority.
    Schedule,
    /// Give a claim back to its set.
    Nack,
    /// Move a claim's time forward.
    Extend,
    /// Keep an undecodable message aside and drop its claim.
    Quarantine,
}

impl Script {
    /// Every script.
    pub const ALL: [Script; 5] = [
        Script::Claim,
        Script::Schedule,
        Script::Nack,
        Script::Extend,
        Script::Quarantine,
    ];

    /// The Lua source.
    pub fn source(self) -> &'static str {
        match self {
            Script::Claim => CLAIM,
            Script::Schedule => SCHEDULE,
            Script::Nack => NACK,
            Script::Extend => EXTEND,
            Script::Quarantine => QUARANTINE,
        }
    }
}

/// KEYS: 1 schedule, 2 schedule priorities, 3 in-flight, 4.. the priority sets, highest
/// priority first.
/// ARGV: 1 now (the emitters' clock, as Hermes compares due times), 2 visibility timeout in
/// seconds (0: at most once, no claims), 3 most messages to take, 4 n (number of sets), 4+i
/// priority of set i, 4+n+i '1' when set i may be taken from, 5+2n the index of the default set,
/// 6+2n.. claims acknowledged since the last call, removed first.
/// A claim is the member `<priority>|<message>` of the in-flight set, scored by the claim time
/// (the server's clock). Returns the priority and the message of each message taken.
const CLAIM: &str = r"
local now = tonumber(ARGV[1])
local visibility = tonumber(ARGV[2])
local max = tonumber(ARGV[3])
local n = tonumber(ARGV[4])
local default_set = KEYS[3 + tonumber(ARGV[5 + 2 * n])]
for i = 6 + 2 * n, #ARGV do
  redis.call('ZREM', KEYS[3], ARGV[i])
end
local function set_of(priority)
  for i = 1, n do
    if ARGV[4 + i] == priority then return KEYS[3 + i] end
  end
  return default_set
end
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 100)
for _, member in ipairs(due) do
  if redis.call('ZREM', KEYS[1], member) == 1 then
    local priority = redis.call('HGET', KEYS[2], member)
    if priority then redis.call('HDEL', KEYS[2], member) end
    redis.call('SADD', set_of(priority), member)
  end
end
local clock = redis.call('TIME')
local server_now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
if visibility > 0 then
  local expired = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', server_now - visibility, 'LIMIT', 0, 100)
  for _, claim in ipairs(expired) do
    redis.call('ZREM', KEYS[3], claim)
    local bar = string.find(claim, '|', 1, true)
    redis.call('SADD', set_of(string.sub(claim, 1, bar - 1)), string.sub(claim, bar + 1))
  end
end
local out = {}
local taken = 0
for i = 1, n do
  if taken >= max then break end
  if ARGV[4 + n + i] == '1' then
    local members = redis.call('SPOP', KEYS[3 + i], max - taken)
    for _, member in ipairs(members) do
      if visibility > 0 then
        redis.call('ZADD', KEYS[3], server_now, ARGV[4 + i] .. '|' .. member)
      end
      out[#out + 1] = ARGV[4 + i]
      out[#out + 1] = member
      taken = taken + 1
    end
  end
end
return out
";

/// KEYS: 1 schedule, 2 schedule priorities. ARGV: 1 due time, 2 message, 3 priority ('' for the
/// default priority, which Hermes' promotion assumes anyway).
const SCHEDULE: &str = r"
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
if ARGV[3] ~= '' then redis.call('HSET', KEYS[2], ARGV[2], ARGV[3]) end
return 1
";

/// KEYS: 1 in-flight, 2 the set to return to. ARGV: 1 the claim.
/// Returns 0 when the claim is gone (expired and returned already).
const NACK: &str = r"
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then return 0 end
local bar = string.find(ARGV[1], '|', 1, true)
redis.call('SADD', KEYS[2], string.sub(ARGV[1], bar + 1))
return 1
";

/// KEYS: 1 in-flight. ARGV: 1 the claim, 2 seconds from now, 3 visibility timeout.
/// Returns 0 when the claim is gone.
const EXTEND: &str = r"
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]) - tonumber(ARGV[3]), ARGV[1])
return 1
";

/// KEYS: 1 quarantine, 2 in-flight. ARGV: 1 message, 2 the claim ('' when none).
const QUARANTINE: &str = r"
redis.call('RPUSH', KEYS[1], ARGV[1])
if ARGV[2] ~= '' then redis.call('ZREM', KEYS[2], ARGV[2]) end
return 1
";
