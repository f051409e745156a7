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
    /// Keep a message as a dead letter (ending its claim) and apply the retention.
    Bury,
    /// The figures of every priority queue.
    Stats,
    /// List (and optionally remove) the scheduled messages of one priority.
    Scheduled,
    /// Empty one state of a queue.
    Purge,
    /// Take dead letters out of the store: back to their set (replay), or for good.
    Unbury,
    /// Store a worker's announcement and keep the workers' hash alive at least as long.
    Announce,
    /// Put a token in the wake list unless one is there.
    Wake,
    /// Add messages to a set and poke the wake list, as one send that carries its poke.
    Send,
    /// Take a uniqueness key and queue the message, or neither when the key is held.
    SendUnique,
    /// Give a uniqueness key up when its holder still holds it.
    ReleaseUnique,
    /// Take a slot of every concurrency bound and record a start in every rate, or nothing.
    Admit,
    /// Record a batch of starts in every rate, or none.
    AdmitStarts,
    /// Move the end of a holder's slots forward.
    RenewSlots,
    /// How much of a bound is in use.
    LimitUsage,
    /// Record a cancellation and drop those kept long enough.
    Cancel,
    /// The cancellations recorded since a time.
    Cancellations,
    /// Create a group with its members, unless it exists.
    GroupOpen,
    /// Add members to a group that is not finished.
    GroupJoin,
    /// Settle a member of a group once, storing its job's record.
    GroupSettle,
    /// Store a job's record and list it among the records kept.
    RecordPut,
    /// A page of the records kept, latest expiry first.
    RecordPage,
    /// A page of the groups kept, the last created first.
    GroupPage,
    /// Queue a group's message unless it was released already.
    GroupRelease,
    /// Mark a group's message released, or clear the mark, queueing nothing.
    GroupMark,
    /// Claim the run of a group's released message for one copy of it.
    GroupClaim,
    /// Add to the counters of a bucket and keep it long enough.
    CountersAdd,
}

impl Script {
    /// Every script.
    pub const ALL: [Script; 30] = [
        Script::Claim,
        Script::Schedule,
        Script::Nack,
        Script::Extend,
        Script::Bury,
        Script::Stats,
        Script::Scheduled,
        Script::Purge,
        Script::Unbury,
        Script::Announce,
        Script::Wake,
        Script::Send,
        Script::SendUnique,
        Script::ReleaseUnique,
        Script::Admit,
        Script::AdmitStarts,
        Script::RenewSlots,
        Script::LimitUsage,
        Script::Cancel,
        Script::Cancellations,
        Script::GroupOpen,
        Script::GroupJoin,
        Script::GroupSettle,
        Script::RecordPut,
        Script::RecordPage,
        Script::GroupPage,
        Script::GroupRelease,
        Script::GroupMark,
        Script::GroupClaim,
        Script::CountersAdd,
    ];

    /// The Lua source.
    pub fn source(self) -> &'static str {
        match self {
            Script::Claim => CLAIM,
            Script::Schedule => SCHEDULE,
            Script::Nack => NACK,
            Script::Extend => EXTEND,
            Script::Bury => BURY,
            Script::Stats => STATS,
            Script::Scheduled => SCHEDULED,
            Script::Purge => PURGE,
            Script::Unbury => UNBURY,
            Script::Announce => ANNOUNCE,
            Script::Wake => WAKE,
            Script::Send => SEND,
            Script::SendUnique => SEND_UNIQUE,
            Script::ReleaseUnique => RELEASE_UNIQUE,
            Script::Admit => ADMIT,
            Script::AdmitStarts => ADMIT_STARTS,
            Script::RenewSlots => RENEW_SLOTS,
            Script::LimitUsage => LIMIT_USAGE,
            Script::Cancel => CANCEL,
            Script::Cancellations => CANCELLATIONS,
            Script::GroupOpen => GROUP_OPEN,
            Script::GroupJoin => GROUP_JOIN,
            Script::GroupSettle => GROUP_SETTLE,
            Script::RecordPut => RECORD_PUT,
            Script::RecordPage => RECORD_PAGE,
            Script::GroupPage => GROUP_PAGE,
            Script::GroupRelease => GROUP_RELEASE,
            Script::GroupMark => GROUP_MARK,
            Script::GroupClaim => GROUP_CLAIM,
            Script::CountersAdd => COUNTERS_ADD,
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
/// the claim of each message taken (at most once: the message itself); when it took none, the
/// due time of the earliest delayed message, alone, if there is one.
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
if taken == 0 then
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  if first[2] then out[1] = first[2] end
end
return out
";

/// The Lua function `wake(list)` a script pokes the wake list with: a token goes in unless one
/// is there (returns 1 when it put one in, 0 when one was still there: no one waited for it),
/// and an unclaimed token stays 60 s.
macro_rules! wake_function {
    () => {
        r"
local function wake(list)
  local pushed = 0
  if redis.call('LLEN', list) == 0 then
    redis.call('RPUSH', list, '1')
    pushed = 1
  end
  redis.call('PEXPIRE', list, 60000)
  return pushed
end
"
    };
}

/// KEYS: 1 schedule, 2 priority index of the schedule, 3 in-flight, 4 the wake list to poke
/// (none: no poke). ARGV: 1 due time, 2 message,
/// 3 priority ('' for the default priority, which Hermes' promotion assumes anyway), 4 now,
/// 5 the claim the message leaves ('' when none).
/// A message of another priority also gets the index entry `<priority>|<message>` with the same
/// due time; whoever promotes it removes it. Entries whose message a promoter that knows no
/// index (PHP's) took are removed here. Returns 0 when the claim is gone (nothing is scheduled).
const SCHEDULE: &str = concat!(
    wake_function!(),
    r"
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
if KEYS[4] then wake(KEYS[4]) end
return 1
"
);

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

/// KEYS: 1 in-flight, 2 the dead letters' ids (sorted set scored by the time), 3 the dead
/// letters (hash id → record). ARGV: 1 the claim ('' when none), 2 id, 3 record, 4 time,
/// 5 most dead letters kept, 6 the time before which none is kept, 7 a suffix that makes the id
/// unique when another dead letter has it.
/// The letter is written before the claim ends, so a failed write leaves the message claimed.
/// Returns 0 when the claim is gone (nothing is kept: the message is delivered again).
const BURY: &str = r"
if ARGV[1] ~= '' and not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
local id = ARGV[2]
if redis.call('HEXISTS', KEYS[3], id) == 1 then id = id .. '~' .. ARGV[7] end
redis.call('HSET', KEYS[3], id, ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[4], id)
if ARGV[1] ~= '' then redis.call('ZREM', KEYS[1], ARGV[1]) end
local function drop(ids)
  for _, old in ipairs(ids) do
    redis.call('ZREM', KEYS[2], old)
    redis.call('HDEL', KEYS[3], old)
  end
end
drop(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[6], 'LIMIT', 0, 1000))
local excess = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[5])
if excess > 0 then drop(redis.call('ZRANGE', KEYS[2], 0, excess - 1)) end
return 1
";

/// KEYS: 1 schedule, 2 priority index of the schedule, 3 the older priority hash, 4 in-flight,
/// then for each of the n queues: its set and its dead letters' ids.
/// ARGV: 1 now, 2 n, 2+i priority of queue i, 3+n the index of the default queue.
/// A scheduled message belongs to the queue the index (or the older hash) names when that queue
/// is one of the n, else to the default queue, as the claim script promotes it.
/// Returns for each queue: members of its set, its scheduled messages due, those due later,
/// its claims, its dead letters, and the due time of its oldest due scheduled message ('' when
/// none).
const STATS: &str = r"
local now = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local default = tonumber(ARGV[3 + n])
local slot = {}
for i = 1, n do slot[ARGV[2 + i]] = i end
local due, later, flight, oldest = {}, {}, {}, {}
for i = 1, n do due[i] = 0; later[i] = 0; flight[i] = 0; oldest[i] = false end
local function count(i, score)
  local value = tonumber(score)
  if value <= now then
    due[i] = due[i] + 1
    if not oldest[i] or value < tonumber(oldest[i]) then oldest[i] = score end
  else
    later[i] = later[i] + 1
  end
end
local owned = {}
local function own(member, priority)
  local i = slot[priority]
  if owned[member] or not i or i == default then return end
  local score = redis.call('ZSCORE', KEYS[1], member)
  if score then
    owned[member] = true
    count(i, score)
  end
end
for _, entry in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  local bar = string.find(entry, '|', 1, true)
  own(string.sub(entry, bar + 1), string.sub(entry, 1, bar - 1))
end
local legacy = redis.call('HGETALL', KEYS[3])
for j = 1, #legacy, 2 do own(legacy[j], legacy[j + 1]) end
local owned_due, owned_later = 0, 0
for i = 1, n do owned_due = owned_due + due[i]; owned_later = owned_later + later[i] end
due[default] = redis.call('ZCOUNT', KEYS[1], '-inf', ARGV[1]) - owned_due
later[default] = redis.call('ZCOUNT', KEYS[1], '(' .. ARGV[1], '+inf') - owned_later
local rank, due_all = 0, redis.call('ZCOUNT', KEYS[1], '-inf', ARGV[1])
while due[default] > 0 and not oldest[default] and rank < due_all do
  local chunk = redis.call('ZRANGE', KEYS[1], rank, math.min(rank + 99, due_all - 1), 'WITHSCORES')
  if #chunk == 0 then break end
  for j = 1, #chunk, 2 do
    if not owned[chunk[j]] then
      oldest[default] = chunk[j + 1]
      break
    end
  end
  rank = rank + 100
end
for _, claim in ipairs(redis.call('ZRANGE', KEYS[4], 0, -1)) do
  local bar = string.find(claim, '|', 1, true)
  if bar then
    local head = string.sub(claim, 1, bar - 1)
    local colon = string.find(head, ':', 1, true)
    if colon then head = string.sub(head, 1, colon - 1) end
    local i = slot[head] or default
    flight[i] = flight[i] + 1
  end
end
local out = {}
for i = 1, n do
  out[#out + 1] = redis.call('SCARD', KEYS[3 + 2 * i])
  out[#out + 1] = due[i]
  out[#out + 1] = later[i]
  out[#out + 1] = flight[i]
  out[#out + 1] = redis.call('ZCARD', KEYS[4 + 2 * i])
  out[#out + 1] = oldest[i] or ''
end
return out
";

/// KEYS: 1 schedule, 2 priority index of the schedule, 3 the older priority hash.
/// ARGV: 1 now, 2 the priority, 3 '1' when it is the default queue's, 4 'due', 'later' or
/// 'all', 5 most to list (0: all), 6 '1' to remove them, 7.. the other queues' priorities.
/// The scheduled messages of one queue (as STATS attributes them), soonest due first: member
/// and due time of each.
const SCHEDULED: &str = r"
local min, max = '-inf', '+inf'
if ARGV[4] == 'due' then max = ARGV[1] elseif ARGV[4] == 'later' then min = '(' .. ARGV[1] end
local priority = ARGV[2]
local limit = tonumber(ARGV[5])
local found = {}
local function full() return limit > 0 and #found >= limit end
if ARGV[3] == '1' then
  local function foreign(member)
    for i = 7, #ARGV do
      if redis.call('ZSCORE', KEYS[2], ARGV[i] .. '|' .. member) then return true end
    end
    local named = redis.call('HGET', KEYS[3], member)
    if not named then return false end
    for i = 7, #ARGV do
      if ARGV[i] == named then return true end
    end
    return false
  end
  -- By rank, so a long schedule is read once; nothing is removed before the walk ends.
  local due_count = redis.call('ZCOUNT', KEYS[1], '-inf', ARGV[1])
  local rank, last = 0, redis.call('ZCARD', KEYS[1]) - 1
  if ARGV[4] == 'due' then last = due_count - 1 elseif ARGV[4] == 'later' then rank = due_count end
  while not full() and rank <= last do
    local chunk = redis.call('ZRANGE', KEYS[1], rank, math.min(rank + 199, last), 'WITHSCORES')
    if #chunk == 0 then break end
    for j = 1, #chunk, 2 do
      if not full() and not foreign(chunk[j]) then
        found[#found + 1] = {chunk[j], chunk[j + 1]}
      end
    end
    rank = rank + 200
  end
else
  local seen = {}
  local function add(member)
    if seen[member] then return end
    seen[member] = true
    local score = redis.call('ZSCORE', KEYS[1], member)
    if not score then return end
    local value = tonumber(score)
    if (ARGV[4] == 'due' and value > tonumber(ARGV[1])) or
       (ARGV[4] == 'later' and value <= tonumber(ARGV[1])) then return end
    found[#found + 1] = {member, score}
  end
  local head = priority .. '|'
  for _, entry in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], min, max)) do
    if string.sub(entry, 1, #head) == head then add(string.sub(entry, #head + 1)) end
  end
  local legacy = redis.call('HGETALL', KEYS[3])
  for j = 1, #legacy, 2 do
    if legacy[j + 1] == priority then add(legacy[j]) end
  end
  table.sort(found, function(a, b) return tonumber(a[2]) < tonumber(b[2]) end)
  while limit > 0 and #found > limit do table.remove(found) end
end
local out = {}
for _, pair in ipairs(found) do
  out[#out + 1] = pair[1]
  out[#out + 1] = pair[2]
  if ARGV[6] == '1' then
    redis.call('ZREM', KEYS[1], pair[1])
    redis.call('ZREM', KEYS[2], priority .. '|' .. pair[1])
    redis.call('HDEL', KEYS[3], pair[1])
  end
end
return out
";

/// ARGV: 1 what to empty. 'set': KEYS 1 a set. 'dead': KEYS 1 the dead letters' ids, 2 the
/// dead letters. 'claims': KEYS 1 in-flight, ARGV 2 the priority whose claims go, 3 '1' when it
/// is the default queue's (which also has the claims of priorities not in 4..), 4.. the other
/// queues' priorities.
/// Returns how many messages went.
const PURGE: &str = r"
if ARGV[1] == 'set' then
  local n = redis.call('SCARD', KEYS[1])
  redis.call('DEL', KEYS[1])
  return n
elseif ARGV[1] == 'dead' then
  local n = redis.call('ZCARD', KEYS[1])
  redis.call('DEL', KEYS[1], KEYS[2])
  return n
end
local others = {}
for i = 4, #ARGV do others[ARGV[i]] = true end
local n = 0
for _, claim in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local bar = string.find(claim, '|', 1, true)
  if bar then
    local head = string.sub(claim, 1, bar - 1)
    local colon = string.find(head, ':', 1, true)
    if colon then head = string.sub(head, 1, colon - 1) end
    if head == ARGV[2] or (ARGV[3] == '1' and not others[head]) then
      redis.call('ZREM', KEYS[1], claim)
      n = n + 1
    end
  end
end
return n
";

/// KEYS: 1 the dead letters' ids, 2 the dead letters, 3 the set to replay to. ARGV: 1 'replay'
/// or 'forget', then pairs of id and the body to put in the set (ignored when forgetting).
/// A dead letter another caller took already is left alone. Returns how many were taken.
const UNBURY: &str = r"
local n = 0
for i = 2, #ARGV, 2 do
  if redis.call('HDEL', KEYS[2], ARGV[i]) == 1 then
    redis.call('ZREM', KEYS[1], ARGV[i])
    if ARGV[1] == 'replay' then redis.call('SADD', KEYS[3], ARGV[i + 1]) end
    n = n + 1
  end
end
return n
";

/// KEYS: 1 the workers' hash. ARGV: 1 the worker's id, 2 its announcement, 3 how long it holds,
/// in milliseconds.
/// The hash expires when no worker has announced itself for as long as the longest-lived
/// announcement holds, so the workers of a queue whose processes were all killed leave nothing
/// behind; an announcement past its time within a live hash is removed by the next listing.
const ANNOUNCE: &str = r"
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
local ttl = tonumber(ARGV[3])
if redis.call('PTTL', KEYS[1]) < ttl then
  redis.call('PEXPIRE', KEYS[1], ttl)
end
return 1
";

/// KEYS: 1 the wake list. Returns what `wake` returns.
const WAKE: &str = concat!(wake_function!(), "return wake(KEYS[1])\n");

/// KEYS: 1 the set, 2 the wake list. ARGV: the messages. Adds them (a thousand per `SADD`, so
/// no call passes Lua too many arguments) and returns what `wake` returns.
const SEND: &str = concat!(
    wake_function!(),
    r"
for i = 1, #ARGV, 1000 do
  redis.call('SADD', KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
return wake(KEYS[2])
"
);

/// KEYS: 1 the uniqueness key, 2 the priority set, 3 schedule, 4 priority index of the
/// schedule, 5 the wake list to poke (none: no poke). ARGV: 1 the holder (the message id), 2
/// the window in milliseconds, 3 message,
/// 4 due time ('' when due now), 5 priority ('' for the default one), as in SCHEDULE.
/// Returns 0 when the key is held (nothing is queued), 1 when the message was queued.
const SEND_UNIQUE: &str = concat!(
    wake_function!(),
    r"
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 0 end
if ARGV[4] == '' then
  redis.call('SADD', KEYS[2], ARGV[3])
else
  redis.call('ZADD', KEYS[3], ARGV[4], ARGV[3])
  if ARGV[5] ~= '' then redis.call('ZADD', KEYS[4], ARGV[4], ARGV[5] .. '|' .. ARGV[3]) end
end
if KEYS[5] then wake(KEYS[5]) end
return 1
"
);

/// KEYS: 1 the uniqueness key. ARGV: 1 the holder. Removes the key when the holder holds it.
const RELEASE_UNIQUE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
";

/// The server's clock in milliseconds, `now`: every process's limits count on one clock.
macro_rules! server_now {
    () => {
        "local clock = redis.call('TIME')\nlocal now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)\n"
    };
}

/// KEYS: one per bound: a sorted set of slots (holder scored by the end of its lease) or of
/// starts (a holder scored by its start), in milliseconds of the server's clock.
/// ARGV: 1 the holder, 2 the lease in ms, then per bound its kind (`s` slots, `r` a rate), its
/// maximum and its period in ms (0 for slots).
/// Returns `{0, 0}` when every bound had room (slots taken, starts recorded, each key living
/// as long as what it holds), else `{i, ms}` for the first full bound `i`: `ms` until its
/// oldest start leaves the window for a rate, -1 for slots.
const ADMIT: &str = concat!(
    server_now!(),
    r"
local holder = ARGV[1]
local lease = tonumber(ARGV[2])
for i = 1, #KEYS do
  local kind, max, period = ARGV[3 * i], tonumber(ARGV[3 * i + 1]), tonumber(ARGV[3 * i + 2])
  if kind == 's' then
    redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)
    if not redis.call('ZSCORE', KEYS[i], holder) and redis.call('ZCARD', KEYS[i]) >= max then
      return {i, -1}
    end
  else
    redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - period)
    local count = redis.call('ZCARD', KEYS[i])
    if count >= max then
      local leaving = redis.call('ZRANGE', KEYS[i], count - max, count - max, 'WITHSCORES')
      return {i, tonumber(leaving[2]) + period - now}
    end
  end
end
for i = 1, #KEYS do
  local kind, period = ARGV[3 * i], tonumber(ARGV[3 * i + 2])
  if kind == 's' then
    redis.call('ZADD', KEYS[i], now + lease, holder)
    if redis.call('PTTL', KEYS[i]) < lease then redis.call('PEXPIRE', KEYS[i], lease) end
  else
    redis.call('ZADD', KEYS[i], now, holder)
    if redis.call('PTTL', KEYS[i]) < period then redis.call('PEXPIRE', KEYS[i], period) end
  end
end
return {0, 0}
"
);

/// KEYS: one per rate: a sorted set of starts (members scored by their time, in milliseconds
/// of the server's clock). ARGV: 1 the holder, 2 the most starts wanted, 3 the time in ms they
/// are used within, then per rate its maximum and its period in ms.
/// Returns `{0, 0, n}` when every rate had room: `n` starts recorded (`<holder>#<i>`), as many
/// as half the room of the fullest rate, up to the number wanted, at least 1; scored now when
/// there is one, else at the end of the time they are used within, so each counts for a whole
/// period after its run begins. Else `{i, ms, 0}` for the first full rate `i`, `ms` until a
/// start leaves its window.
const ADMIT_STARTS: &str = concat!(
    server_now!(),
    r"
local holder = ARGV[1]
local n = tonumber(ARGV[2])
local within = tonumber(ARGV[3])
for i = 1, #KEYS do
  local max, period = tonumber(ARGV[2 + 2 * i]), tonumber(ARGV[3 + 2 * i])
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - period)
  local count = redis.call('ZCARD', KEYS[i])
  if count >= max then
    local leaving = redis.call('ZRANGE', KEYS[i], count - max, count - max, 'WITHSCORES')
    return {i, tonumber(leaving[2]) + period - now, 0}
  end
  n = math.min(n, math.max(1, math.floor((max - count) / 2)))
end
local at = now
if n > 1 then at = now + within end
local entries = {}
for j = 1, n do
  entries[2 * j - 1] = at
  entries[2 * j] = holder .. '#' .. j
end
for i = 1, #KEYS do
  local period = tonumber(ARGV[3 + 2 * i])
  redis.call('ZADD', KEYS[i], unpack(entries))
  if redis.call('PTTL', KEYS[i]) < at - now + period then
    redis.call('PEXPIRE', KEYS[i], at - now + period)
  end
end
return {0, 0, n}
"
);

/// KEYS: the slot sets. ARGV: 1 the holder, 2 the lease in ms. Moves the end of the holder's
/// slots (those it still holds, their lease not over) to a lease from now, at least; returns
/// how many it still held.
const RENEW_SLOTS: &str = concat!(
    server_now!(),
    r"
local lease = tonumber(ARGV[2])
local held = 0
for i = 1, #KEYS do
  local ends = redis.call('ZSCORE', KEYS[i], ARGV[1])
  if ends and tonumber(ends) > now then
    held = held + 1
    if tonumber(ends) < now + lease then
      redis.call('ZADD', KEYS[i], now + lease, ARGV[1])
      if redis.call('PTTL', KEYS[i]) < lease then redis.call('PEXPIRE', KEYS[i], lease) end
    end
  end
end
return held
"
);

/// KEYS: 1 a bound's set. ARGV: 1 its kind (`s`, `r`), 2 its period in ms. The slots whose
/// lease has not ended, or the starts within the period.
const LIMIT_USAGE: &str = concat!(
    server_now!(),
    r"
if ARGV[1] == 's' then return redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf') end
return redis.call('ZCOUNT', KEYS[1], '(' .. (now - tonumber(ARGV[2])), '+inf')
"
);

/// KEYS: 1 the sorted set of cancelled ids by time, 2 the hash id → record.
/// ARGV: 1 the id, 2 its time (Unix seconds), 3 the record, 4 the oldest time kept.
const CANCEL: &str = r"
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
local old = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[4])
for _, id in ipairs(old) do redis.call('HDEL', KEYS[2], id) end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[4])
return 0
";

/// KEYS: as `CANCEL`. ARGV: 1 the earliest time (Unix seconds), 2 the oldest time kept. The
/// records from then on, oldest first, 1000 at most (a reader goes on from the last one).
const CANCELLATIONS: &str = r"
local from = math.max(tonumber(ARGV[1]), tonumber(ARGV[2]))
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], from, '+inf', 'LIMIT', 0, 1000)
if #ids == 0 then return {} end
return redis.call('HMGET', KEYS[2], unpack(ids))
";

/// KEYS: 1 the bucket's hash. ARGV: 1 how long to keep it at least (ms), 2.. counter names
/// and counts, in pairs. Adds each count; the bucket's end moves later, never earlier.
const COUNTERS_ADD: &str = r"
for i = 2, #ARGV, 2 do
  redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1])
end
local left = redis.call('PTTL', KEYS[1])
if left < tonumber(ARGV[1]) then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return 1
";

/// KEYS: 1 the group's hash, 2 its members' hash, 3 the groups kept. ARGV: 1 the spec, 2 how
/// long to keep it once finished (ms), 3 how long to keep it unfinished (ms), 4 when it was
/// created (Unix ms), 5.. the members. Creates the group unless it exists, and lists it
/// (scored by its negated creation time, so that the last comes first; entries of groups
/// created longer ago than both keeps are dropped); returns 1 when it did.
const GROUP_OPEN: &str = r"
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local total = 0
for i = 5, #ARGV do
  total = total + redis.call('HSETNX', KEYS[2], ARGV[i], '')
end
redis.call('HSET', KEYS[1], 'spec', ARGV[1], 'total', total, 'succeeded', 0, 'failed', 0, 'keep', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
if total > 0 then redis.call('PEXPIRE', KEYS[2], ARGV[3]) end
local kept = tonumber(ARGV[2]) + tonumber(ARGV[3])
redis.call('ZADD', KEYS[3], -tonumber(ARGV[4]), KEYS[1])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '(' .. (kept - tonumber(ARGV[4])), '+inf')
if redis.call('PTTL', KEYS[3]) < kept then redis.call('PEXPIRE', KEYS[3], kept) end
return 1
";

/// KEYS: 1 the group's hash, 2 its members' hash. ARGV: 1 how long to keep it unfinished
/// (ms), 2.. the members. Adds the members not there yet; returns -1 without the group, -2
/// when it is finished, else how many were added.
const GROUP_JOIN: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if redis.call('HEXISTS', KEYS[1], 'finished') == 1 then return -2 end
local added = 0
for i = 2, #ARGV do
  added = added + redis.call('HSETNX', KEYS[2], ARGV[i], '')
end
redis.call('HINCRBY', KEYS[1], 'total', added)
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
return added
";

/// Lists the record `record` in the sorted set `records`, to expire in `keep` ms (scored by
/// the negated expiry, so that the latest comes first), drops the expired ones, and keeps the
/// set as long as its latest record.
macro_rules! list_record_function {
    () => {
        r"
local function list_record(records, record, keep)
  local time = redis.call('TIME')
  local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  redis.call('ZADD', records, -(now + tonumber(keep)), record)
  redis.call('ZREMRANGEBYSCORE', records, '(' .. -now, '+inf')
  local latest = redis.call('ZRANGE', records, 0, 0, 'WITHSCORES')
  if latest[2] then redis.call('PEXPIRE', records, math.max(1, -tonumber(latest[2]) - now)) end
end
"
    };
}

/// KEYS: 1 the record, 2 the records kept. ARGV: 1 the record's JSON, 2 how long to keep it
/// (ms). Stores the record and lists it.
const RECORD_PUT: &str = concat!(
    list_record_function!(),
    r"
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
list_record(KEYS[2], KEYS[1], ARGV[2])
return 1
"
);

/// The keys of a sorted set `index` after the cursor `score`, `key` (`score` '' for the first
/// page), in its order (by score, then by key), `n + 1` at most (the last one there when more
/// follow).
macro_rules! index_page_function {
    () => {
        r"
local function index_page(index, score, key, n)
  local keys = {}
  local above = '-inf'
  if score ~= '' then
    above = '(' .. score
    local ties = redis.call('ZRANGEBYSCORE', index, score, score)
    local from = #ties + 1
    for i = #ties, 1, -1 do
      if ties[i] == key then from = i + 1; break end
      if ties[i] > key then from = i end
    end
    for i = from, #ties do
      if #keys <= n then table.insert(keys, ties[i]) end
    end
  end
  local rest = redis.call('ZRANGEBYSCORE', index, above, '+inf', 'LIMIT', 0, n + 1 - #keys)
  for _, k in ipairs(rest) do table.insert(keys, k) end
  return keys
end
"
    };
}

/// KEYS: 1 the records kept. ARGV: 1 the cursor's score ('' for the first page), 2 the
/// cursor's record key, 3 how many to read. Returns, latest expiry first (then by key), after
/// the cursor: per record its key, its score and its JSON (false once expired), and one more
/// key when more follow.
const RECORD_PAGE: &str = concat!(
    index_page_function!(),
    r"
local n = tonumber(ARGV[3])
local out = {}
for i, key in ipairs(index_page(KEYS[1], ARGV[1], ARGV[2], n)) do
  if i > n then table.insert(out, key); break end
  table.insert(out, key)
  table.insert(out, redis.call('ZSCORE', KEYS[1], key))
  table.insert(out, redis.call('GET', key))
end
return out
"
);

/// KEYS: 1 the groups kept. ARGV: 1 the cursor's score ('' for the first page), 2 the
/// cursor's group key, 3 how many to read. Returns, the last created first, after the cursor:
/// per group its hash's key and its score, and one more key when more follow.
const GROUP_PAGE: &str = concat!(
    index_page_function!(),
    r"
local n = tonumber(ARGV[3])
local out = {}
for i, key in ipairs(index_page(KEYS[1], ARGV[1], ARGV[2], n)) do
  table.insert(out, key)
  if i > n then break end
  table.insert(out, redis.call('ZSCORE', KEYS[1], key))
end
return out
"
);

/// Settles members of groups, each once. KEYS: per settle, 3 keys: the group's hash, its
/// members' hash, and the member's job record (the group's hash again when there is none);
/// then the records kept. ARGV: 1 now, then per settle 5 values: the member, its outcome, '1'
/// when it succeeded, the record ('' for none), how long to keep it (ms). Stores and lists each
/// record; counts each member
/// once, when it is one and not settled yet, and marks its group finished when none is left,
/// to expire once kept long enough (an unfinished group expires 30 days after it was opened or
/// last joined). Returns per settle {total, succeeded, failed, counted}, total -1 without the
/// group.
const GROUP_SETTLE: &str = concat!(
    list_record_function!(),
    r"
local out = {}
for i = 0, (#KEYS - 1) / 3 - 1 do
  local group, members, record = KEYS[3 * i + 1], KEYS[3 * i + 2], KEYS[3 * i + 3]
  local member, outcome, succeeded = ARGV[5 * i + 2], ARGV[5 * i + 3], ARGV[5 * i + 4]
  if ARGV[5 * i + 5] ~= '' then
    redis.call('SET', record, ARGV[5 * i + 5], 'PX', ARGV[5 * i + 6])
    list_record(KEYS[#KEYS], record, ARGV[5 * i + 6])
  end
  if redis.call('EXISTS', group) == 0 then
    table.insert(out, -1); table.insert(out, 0); table.insert(out, 0); table.insert(out, 0)
  else
    local counted = 0
    if redis.call('HGET', members, member) == '' then
      redis.call('HSET', members, member, outcome)
      redis.call('HINCRBY', group, succeeded == '1' and 'succeeded' or 'failed', 1)
      counted = 1
    end
    local state = redis.call('HMGET', group, 'total', 'succeeded', 'failed', 'keep')
    local total, ok, failed = tonumber(state[1]), tonumber(state[2]), tonumber(state[3])
    if counted == 1 and ok + failed >= total then
      redis.call('HSET', group, 'finished', ARGV[1])
      redis.call('PEXPIRE', group, state[4])
      redis.call('PEXPIRE', members, state[4])
    end
    table.insert(out, total); table.insert(out, ok); table.insert(out, failed)
    table.insert(out, counted)
  end
end
return out
"
);

/// KEYS: 1 the group's hash, 2 the message's set, 3 schedule, 4 priority index of the
/// schedule, 5 (optional) the wake list. ARGV: 1 the release's name, 2 the message, 3 its due
/// time ('' for now), 4 its priority when delayed on another set than the default ('' else).
/// Queues the message and marks the name released, unless it was; returns -1 without the
/// group, 0 when released already, 1 when queued.
const GROUP_RELEASE: &str = concat!(
    wake_function!(),
    r"
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if redis.call('HSETNX', KEYS[1], 'released:' .. ARGV[1], 1) == 0 then return 0 end
if ARGV[3] == '' then
  redis.call('SADD', KEYS[2], ARGV[2])
else
  redis.call('ZADD', KEYS[3], ARGV[3], ARGV[2])
  if ARGV[4] ~= '' then redis.call('ZADD', KEYS[4], ARGV[3], ARGV[4] .. '|' .. ARGV[2]) end
end
if KEYS[5] then wake(KEYS[5]) end
return 1
"
);

/// KEYS: 1 the group's hash. ARGV: 1 the name of a message the group released, 2 a copy of it.
/// The first copy to claim the message's run keeps it (the field `claim:<name>`). Returns 1
/// when ARGV[2] holds it, or when there is no such group; 0 when another copy does.
const GROUP_CLAIM: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return 1 end
local field = 'claim:' .. ARGV[1]
redis.call('HSETNX', KEYS[1], field, ARGV[2])
if redis.call('HGET', KEYS[1], field) == ARGV[2] then return 1 end
return 0
";

/// KEYS: 1 the group's hash. ARGV: 1 the release's name, 2 '1' to mark it released, '0' to
/// clear the mark. Returns 1 when the mark changed, 0 when not (or without the group).
const GROUP_MARK: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if ARGV[2] == '1' then return redis.call('HSETNX', KEYS[1], 'released:' .. ARGV[1], 1) end
return redis.call('HDEL', KEYS[1], 'released:' .. ARGV[1])
";
