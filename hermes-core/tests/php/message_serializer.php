<?php
// What Hermes 6's MessageSerializer does with a message on a PHP worker: it decodes the JSON
// read from standard input into the fields Hermes' Message has, and encodes that message again
// in Hermes' shape on standard output. Keys Hermes does not know are dropped, as PHP drops them.
//
//   php message_serializer.php < message.json               the message re-encoded
//   php message_serializer.php <execute_at> < message.json  the copy a PHP retry sends:
//                                                            retries + 1, due at <execute_at>
//
// Exits 2 when the input is not a message Hermes could decode, 3 when encoding fails.

declare(strict_types=1);

// PHP's default, set so that no php.ini can change how floats are written.
ini_set('serialize_precision', '-1');

function fail(int $code, string $reason): void
{
    fwrite(STDERR, $reason . "\n");
    exit($code);
}

$data = json_decode((string) stream_get_contents(STDIN), true);
if (!is_array($data) || !isset($data['message']) || !is_array($data['message'])) {
    fail(2, 'the input is not a Hermes message');
}
$message = $data['message'];
foreach (['type', 'id', 'created'] as $key) {
    if (!isset($message[$key])) {
        fail(2, "message.$key is missing");
    }
}

$payload = isset($message['payload']) && is_array($message['payload']) ? $message['payload'] : null;
$executeAt = isset($message['execute_at']) ? floatval($message['execute_at']) : null;
$retries = isset($message['retries']) ? intval($message['retries']) : 0;
if (isset($argv[1])) {
    $executeAt = floatval($argv[1]);
    $retries += 1;
}

$encoded = json_encode([
    'message' => [
        'id' => (string) $message['id'],
        'type' => (string) $message['type'],
        'created' => floatval($message['created']),
        'payload' => $payload,
        'execute_at' => $executeAt,
        'retries' => $retries,
    ],
], JSON_INVALID_UTF8_IGNORE);
if ($encoded === false) {
    fail(3, json_last_error_msg());
}
echo $encoded;
