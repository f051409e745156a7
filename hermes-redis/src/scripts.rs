//! The Lua scripts: every change that touches more than one key is one atomic script call.

/// A script the driver runs with `EVALSHA` (loading it when the server does not have it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Script {
    /// Promote due delayed messages, return expired claims, then claim up to N messages.
    Claim,
    /// Schedule a delayed message, remembering its priority; also for a claimed message that
    /// is not due yet.
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

/// KEYS: 1 schedule, 2 priority index of the schedule, 3 the older priority hash, 4 in-flight,
/// 5.. the priority sets, highest priority first.
/// ARGV: 1 now (the emitters' clock, as Hermes compares due times), 2 visibility timeout in
/// seconds (0: at most once, no claims), 3 most messages to take, 4 n (number of sets), 4+i
/// priority of set i, 4+n+i '1' when set i may be taken from, 5+2n the index of the default set,
/// 6+2n a token prefix unique to this call, 7+2n.. claims acknowledged since the last call,
/// removed first.
/// A claim is the member `<priority>:<token>|<message>` of the in-flight set, scored by the
/// claim time (the server's clock); the token makes every claim of one message a member of its
/// own, so an operation on an expired claim cannot touch the next one. Claims of the older
/// format `<priority>|<message>` still come back when they expire. Returns the priority and
/// the claim of each message taken (at most once: the message itself).
const CLAIM: &str = r"
local now = tonumber(ARGV[1])
local visibility = tonumber(ARGV[2])
local max = tonumber(ARGV[3])
local n = tonumber(ARGV[4])
local default_set = KEYS[4 + tonumber(ARGV[5 + 2 * n])]
local prefix = ARGV[6 + 2 * n]
for i = 7 + 2 * n, #ARGV do
  redis.call('ZREM', KEYS[4], ARGV[i])
end
local function set_of(priority)
  for i = 1, n do
    if ARGV[4 + i] == priority then return KEYS[4 + i] end
  end
  return default_set
end
local indexed = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, 100)
for _, entry in ipairs(indexed) do
  redis.call('ZREM', KEYS[2], entry)
  local bar = string.find(entry, '|', 1, true)
  local member = string.sub(entry, bar + 1)
  if redis.call('ZREM', KEYS[1], member) == 1 then
    redis.call('SADD', set_of(string.sub(entry, 1, bar - 1)), member)
  end
end
-- While due index entries remain, the members they name are still in the schedule: promote
-- the rest of the schedule on a later call, so none of them lands in the default set.
local due = {}
if #indexed < 100 then
  due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 100)
end
local legacy = #due > 0 and redis.call('EXISTS', KEYS[3]) == 1
for _, member in ipairs(due) do
  if redis.call('ZREM', KEYS[1], member) == 1 then
    local priority = nil
    if legacy then
      priority = redis.call('HGET', KEYS[3], member)
      if priority then redis.call('HDEL', KEYS[3], member) end
    end
    redis.call('SADD', set_of(priority), member)
  end
end
local clock = redis.call('TIME')
local server_now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
if visibility > 0 then
  local expired = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', server_now - visibility, 'LIMIT', 0, 100)
  for _, claim in ipairs(expired) do
    redis.call('ZREM', KEYS[4], claim)
    local bar = string.find(claim, '|', 1, true)
    local head = string.sub(claim, 1, bar - 1)
    local colon = string.find(head, ':', 1, true)
    if colon then head = string.sub(head, 1, colon - 1) end
    redis.call('SADD', set_of(head), string.sub(claim, bar + 1))
  end
end
local out = {}
local taken = 0
for i = 1, n do
  if taken >= max then break end
  if ARGV[4 + n + i] == '1' then
    local members = redis.call('SPOP', KEYS[4 + i], max - taken)
    for _, member in ipairs(members) do
      if visibility > 0 then
        member = ARGV[4 + i] .. ':' .. prefix .. '.' .. taken .. '|' .. member
        redis.call('ZADD', KEYS[4], server_now, member)
      end
      out[#out + 1] = ARGV[4 + i]
      out[#out + 1] = member
      taken = taken + 1
    end
  end
end
return out
";

/// KEYS: 1 schedule, 2 priority index of the schedule, 3 in-flight. ARGV: 1 due time, 2 message,
/// 3 priority ('' for the default priority, which Hermes' promotion assumes anyway), 4 now,
/// 5 the claim the message leaves ('' when none).
/// A message of another priority also gets the index entry `<priority>|<message>` with the same
/// due time; whoever promotes it removes it. Entries whose message a promoter that knows no
/// index (PHP's) took are removed here. Returns 0 when the claim is gone (nothing is scheduled).
const SCHEDULE: &str = r"
if ARGV[5] ~= '' and redis.call('ZREM', KEYS[3], ARGV[5]) == 0 then return 0 end
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
if ARGV[3] ~= '' then redis.call('ZADD', KEYS[2], ARGV[1], ARGV[3] .. '|' .. ARGV[2]) end
local stale = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[4], 'LIMIT', 0, 100)
for _, entry in ipairs(stale) do
  local bar = string.find(entry, '|', 1, true)
  if not redis.call('ZSCORE', KEYS[1], string.sub(entry, bar + 1)) then
    redis.call('ZREM', KEYS[2], entry)
  end
end
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
