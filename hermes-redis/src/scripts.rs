//! The Lua scripts: every change that touches more than one key is one atomic script call.

/// A script the driver runs with `EVALSHA` (loading it when the server does not have it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Script {
    /// Promote due delayed messages, return expired claims, then claim up to N messages.
    Claim,
    /// Schedule a delayed message, remembering its priority.
    Schedule,
    /// Remove claims for good.
    Ack,
    /// Give a claim back to its set.
    Nack,
    /// Move a claim's time forward.
    Extend,
    /// Keep an undecodable message aside and drop its claim.
    Quarantine,
}

impl Script {
    /// Every script.
    pub const ALL: [Script; 6] = [
        Script::Claim,
        Script::Schedule,
        Script::Ack,
        Script::Nack,
        Script::Extend,
        Script::Quarantine,
    ];

    /// The Lua source.
    pub fn source(self) -> &'static str {
        match self {
            Script::Claim => CLAIM,
            Script::Schedule => SCHEDULE,
            Script::Ack => ACK,
            Script::Nack => NACK,
            Script::Extend => EXTEND,
            Script::Quarantine => QUARANTINE,
        }
    }
}

/// KEYS: 1 schedule, 2 schedule priorities, 3 in-flight, 4 in-flight data, 5.. the priority sets,
/// highest priority first.
/// ARGV: 1 now (the emitters' clock, as Hermes compares due times), 2 visibility timeout in
/// seconds (0: at most once, no claims), 3 most messages to take, 4 claim token prefix, 5 first
/// token number, 6 n (number of sets), 6+i priority of set i, 6+n+i '1' when set i may be taken
/// from, 7+2n the index of the default set.
/// Returns priority, token, message for each message taken.
const CLAIM: &str = r"
local now = tonumber(ARGV[1])
local visibility = tonumber(ARGV[2])
local max = tonumber(ARGV[3])
local n = tonumber(ARGV[6])
local default_set = KEYS[4 + tonumber(ARGV[7 + 2 * n])]
local function set_of(priority)
  for i = 1, n do
    if ARGV[6 + i] == priority then return KEYS[4 + i] end
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
  for _, token in ipairs(expired) do
    local data = redis.call('HGET', KEYS[4], token)
    redis.call('ZREM', KEYS[3], token)
    redis.call('HDEL', KEYS[4], token)
    if data then
      local bar = string.find(data, '|', 1, true)
      redis.call('SADD', set_of(string.sub(data, 1, bar - 1)), string.sub(data, bar + 1))
    end
  end
end
local out = {}
local taken = 0
local token_number = tonumber(ARGV[5])
for i = 1, n do
  if taken >= max then break end
  if ARGV[6 + n + i] == '1' then
    local members = redis.call('SPOP', KEYS[4 + i], max - taken)
    for _, member in ipairs(members) do
      local token = ''
      if visibility > 0 then
        token = ARGV[4] .. token_number
        token_number = token_number + 1
        redis.call('ZADD', KEYS[3], server_now, token)
        redis.call('HSET', KEYS[4], token, ARGV[6 + i] .. '|' .. member)
      end
      out[#out + 1] = ARGV[6 + i]
      out[#out + 1] = token
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

/// KEYS: 1 in-flight, 2 in-flight data. ARGV: the tokens.
const ACK: &str = r"
for _, token in ipairs(ARGV) do
  redis.call('ZREM', KEYS[1], token)
  redis.call('HDEL', KEYS[2], token)
end
return 1
";

/// KEYS: 1 in-flight, 2 in-flight data, 3 the set to return to. ARGV: 1 token.
/// Returns 0 when the claim is gone (expired and returned already).
const NACK: &str = r"
local data = redis.call('HGET', KEYS[2], ARGV[1])
if not data then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
local bar = string.find(data, '|', 1, true)
redis.call('SADD', KEYS[3], string.sub(data, bar + 1))
return 1
";

/// KEYS: 1 in-flight. ARGV: 1 token, 2 seconds from now, 3 visibility timeout.
/// Returns 0 when the claim is gone.
const EXTEND: &str = r"
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]) - tonumber(ARGV[3]), ARGV[1])
return 1
";

/// KEYS: 1 quarantine, 2 in-flight, 3 in-flight data. ARGV: 1 message, 2 token ('' when none).
const QUARANTINE: &str = r"
redis.call('RPUSH', KEYS[1], ARGV[1])
if ARGV[2] ~= '' then
  redis.call('ZREM', KEYS[2], ARGV[2])
  redis.call('HDEL', KEYS[3], ARGV[2])
end
return 1
";
