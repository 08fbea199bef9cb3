#!/usr/bin/env python3
"""An independent streaming client that times OpenAI-compatible chat streams the way
`vllm bench serve` does, so servegate's client can be compared with that method here.

Written for servegate, not copied from vLLM. What it keeps of vLLM's request function
(vllm/benchmarks/lib/endpoint_request_func.py, `async_request_openai_chat_completions`, and the
session that vllm/benchmarks/serve.py builds) is the timing method and its cost:

- one aiohttp ClientSession for the run, a TCPConnector limited to the concurrency, keep-alive
  60 s, a 6-hour total timeout;
- the response read with `response.content.iter_any()`, each read stripped, decoded with an
  incremental UTF-8 decoder and split into SSE messages one message at a time off the head of a
  string buffer; a trailing message whose blank line the strip removed is taken when it parses;
- `time.perf_counter()` once per data message, before `json.loads` of that message;
- TTFT at the first chunk that has choices, then one ITL entry per later chunk with choices,
  `timestamp - most_recent_timestamp`; completion tokens from the usage chunk;
- the metrics of `calculate_metrics`: numpy mean and linear-interpolated percentiles;
- the run as `vllm bench serve` drives it: payloads built first, then `gc.collect()` and
  `gc.freeze()`, then one task per request (`asyncio.create_task`), each behind an
  `asyncio.Semaphore(max_concurrency)`, gathered.

Where it differs, it says so: requests send `max_tokens` (the bench servers read that field),
the per-request deadline replaces the 6-hour timeout for measured requests, the session ignores
proxy variables (loopback only), and the warm-up sends one request per slot where vLLM sends one.

Usage:
  aiohttp_client.py ingest --url ORIGIN --concurrency C --requests N --tokens T --deadline-s S
  aiohttp_client.py itl --url ORIGIN --concurrency C --chunks K --rounds R --interval-ms I
      [--deadline-factor 1.5] [--detail]
With --detail, the ITL output also has `requestsDetail`: per request, the sha256 of the body
bytes aiohttp sent (`json.dumps(payload)`, UTF-8, as aiohttp's `json=` serializes it) and its
gaps between content chunks, ms, for matching against the server's own send log.
Prints one JSON object on stdout. Needs only the standard library, aiohttp and numpy.
"""

import argparse
import asyncio
import codecs
import gc
import hashlib
import json
import resource
import sys
import time

import aiohttp
import numpy as np

CHAT_PATH = "/v1/chat/completions"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
#: vLLM's session timeout.
SESSION_TIMEOUT = aiohttp.ClientTimeout(total=6 * 60 * 60)
#: Tokens per warm-up request in ingest mode; chunks per warm-up stream in ITL mode (at most).
WARM_TOKENS = 8
WARM_CHUNKS = 50
MAX_FAILURES = 5


class SseSplitter:
    """Whole SSE messages out of a stream's reads, with the cost profile of vLLM's handler:
    each message is cut off the head of one string buffer (a copy of the rest per message)."""

    def __init__(self):
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._text = ""

    def feed(self, data):
        """Adds one (stripped) read; returns the messages it completed, stripped, in order."""
        self._text += self._decoder.decode(data)
        messages = []
        while True:
            head, separator, rest = self._text.partition("\n\n")
            if not separator:
                break
            self._text = rest
            head = head.strip()
            if head:
                messages.append(head)
        # The caller strips each read, so a read that ended on a message's blank line leaves
        # that message here without it: take it when it is [DONE] or parses as JSON.
        if self._text.startswith("data: "):
            body = self._text[len("data: ") :].strip()
            if body == "[DONE]" or (body and _parses(body)):
                messages.append(self._text.strip())
                self._text = ""
        return messages


def _parses(text):
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return False
    return True


class StreamRecord:
    """What one request saw. Times are `time.perf_counter()` seconds."""

    __slots__ = ("error", "ttft", "itl", "usage_tokens", "content_chunks", "content_at", "sent_at")

    def __init__(self):
        self.error = None
        self.ttft = None
        self.itl = []
        self.usage_tokens = None
        self.content_chunks = 0
        #: Per content chunk (ITL mode only): the message's timestamp and the server's "t".
        self.content_at = []
        self.sent_at = []


def chat_payload(tokens, index, label="Request"):
    return {
        "model": MODEL,
        "messages": [
            {
                "role": "user",
                "content": f"{label} {index}. Summarize the following notes in a few sentences: the client reads every chunk.",
            }
        ],
        "max_tokens": tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


async def stream_chat(session, url, payload, timeout, keep_stamps):
    """One streamed chat request, timed message by message as vLLM's request function does."""
    record = StreamRecord()
    started = time.perf_counter()
    most_recent = started
    try:
        async with session.post(url=url, json=payload, timeout=timeout) as response:
            if response.status != 200:
                record.error = f"HTTP {response.status}: {response.reason or ''}"
                return record
            splitter = SseSplitter()
            async for data in response.content.iter_any():
                data = data.strip()
                if not data:
                    continue
                for message in splitter.feed(data):
                    if message.startswith(":"):
                        continue
                    body = message.removeprefix("data: ")
                    if body == "[DONE]":
                        continue
                    timestamp = time.perf_counter()
                    chunk = json.loads(body)
                    choices = chunk.get("choices")
                    if choices:
                        if record.ttft is None:
                            record.ttft = timestamp - started
                        else:
                            record.itl.append(timestamp - most_recent)
                        most_recent = timestamp
                        if choices[0]["delta"].get("content"):
                            record.content_chunks += 1
                            if keep_stamps:
                                record.content_at.append(timestamp)
                                record.sent_at.append(chunk.get("t"))
                    elif usage := chunk.get("usage"):
                        record.usage_tokens = usage.get("completion_tokens")
            if record.ttft is None:
                record.error = "no chunk with choices: no TTFT"
    except asyncio.TimeoutError:
        record.error = f"deadline: no end of stream within {timeout.total} s"
    except Exception as error:  # noqa: BLE001 - every failure is a result, as in vLLM's client
        record.error = f"{type(error).__name__}: {error}"
    return record


def new_session(concurrency):
    """The session vLLM's benchmark builds: connections limited to the concurrency, kept alive."""
    connector = aiohttp.TCPConnector(
        limit=concurrency,
        limit_per_host=concurrency,
        ttl_dns_cache=300,
        use_dns_cache=True,
        keepalive_timeout=60,
        enable_cleanup_closed=True,
        force_close=False,
        ssl=False,
    )
    # trust_env=False where vLLM has True: proxy variables must not send loopback traffic away.
    return aiohttp.ClientSession(connector=connector, trust_env=False, timeout=SESSION_TIMEOUT)


async def closed_loop(concurrency, count, run):
    """As `vllm bench serve` at an infinite rate: a task per request, each behind a semaphore of
    `concurrency`, gathered."""
    semaphore = asyncio.Semaphore(concurrency)

    async def limited(index):
        async with semaphore:
            await run(index)

    tasks = [asyncio.create_task(limited(index)) for index in range(count)]
    await asyncio.gather(*tasks)


async def warm_up(session, url, concurrency, tokens):
    """Unmeasured: one request per slot at once, which opens every connection. Its prompts differ
    from the measured ones, so no two requests send the same bytes."""
    timeout = aiohttp.ClientTimeout(total=60)
    records = await asyncio.gather(
        *(stream_chat(session, url, chat_payload(tokens, i, "Warm-up"), timeout, False) for i in range(concurrency))
    )
    failed = [r.error for r in records if r.error is not None]
    if failed:
        raise RuntimeError(f"warm-up request failed: {failed[0]}")


async def measure(url, concurrency, requests, tokens, warm_tokens, timeout, keep_stamps):
    """Warm-up, then `requests` measured requests, closed loop: records, wall s, CPU s."""
    records = [None] * requests
    payloads = [chat_payload(tokens, i) for i in range(requests)]
    async with new_session(concurrency) as session:
        await warm_up(session, url, concurrency, warm_tokens)
        # As vLLM's benchmark does before its run: "avoid GC processing 'static' data".
        gc.collect()
        gc.freeze()

        async def run(index):
            records[index] = await stream_chat(session, url, payloads[index], timeout, keep_stamps)

        cpu0 = time.process_time()
        t0 = time.perf_counter()
        await closed_loop(concurrency, requests, run)
        wall_s = time.perf_counter() - t0
        cpu_s = time.process_time() - cpu0
    return records, wall_s, cpu_s, payloads


def vllm_metrics(records):
    """TTFT and ITL over the successful requests as `calculate_metrics` reports them, ms."""
    ok = [r for r in records if r.error is None]
    ttfts = [r.ttft for r in ok]
    itls = [gap for r in ok for gap in r.itl]
    return {
        "meanTtftMs": float(np.mean(ttfts or 0)) * 1000,
        "p99TtftMs": float(np.percentile(ttfts or 0, 99)) * 1000,
        "meanItlMs": float(np.mean(itls or 0)) * 1000,
        "p99ItlMs": float(np.percentile(itls or 0, 99)) * 1000,
    }


def peak_rss_mb():
    """Peak resident set of this process, MB: VmHWM of /proc/self/status where there is one.
    Not ru_maxrss: Linux carries the peak of the image before exec into it, so a client started
    by a large process would report that process's RSS."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    # ru_maxrss is in KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def allow_sockets(concurrency):
    """Raises the open-file soft limit when it would not cover one socket per slot."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = concurrency + 64
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted if hard == resource.RLIM_INFINITY else min(wanted, hard), hard))


def failure_note(record, expected):
    if record.error is not None:
        return record.error
    return f"contents: {record.content_chunks} chunks, usage {record.usage_tokens}, {expected} expected"


def run_ingest(args):
    url = args.url.rstrip("/") + CHAT_PATH
    timeout = aiohttp.ClientTimeout(total=args.deadline_s)
    records, wall_s, cpu_s, _ = asyncio.run(
        measure(url, args.concurrency, args.requests, args.tokens, WARM_TOKENS, timeout, False)
    )
    ok_requests = 0
    completion_tokens = 0
    failures = []
    for record in records:
        completion_tokens += record.usage_tokens or 0
        if record.error is None and record.usage_tokens == args.tokens and record.content_chunks == args.tokens:
            ok_requests += 1
        elif len(failures) < MAX_FAILURES:
            failures.append(failure_note(record, args.tokens))
    return {
        "mode": "ingest",
        "concurrency": args.concurrency,
        "requests": args.requests,
        "okRequests": ok_requests,
        "completionTokens": completion_tokens,
        "wallS": wall_s,
        "tokPerS": completion_tokens / wall_s,
        "cpuS": cpu_s,
        "peakRssMB": peak_rss_mb(),
        "clock": time.get_clock_info("perf_counter").implementation,
        "vllm": vllm_metrics(records),
        "failures": failures,
    }


def run_itl(args):
    url = args.url.rstrip("/") + CHAT_PATH
    deadline_s = args.deadline_factor * args.chunks * args.interval_ms / 1000
    requests = args.concurrency * args.rounds
    records, wall_s, cpu_s, payloads = asyncio.run(
        measure(
            url,
            args.concurrency,
            requests,
            args.chunks,
            min(args.chunks, WARM_CHUNKS),
            aiohttp.ClientTimeout(total=deadline_s),
            True,
        )
    )
    itl_error, client_error, server_error, arrival = [], [], [], []
    ok_requests = 0
    delivered = 0
    failures = []
    for record in records:
        at, sent = record.content_at, record.sent_at
        delivered += len(at)
        stamped = all(isinstance(t, (int, float)) for t in sent)
        if record.error is None and len(at) == args.chunks and stamped:
            ok_requests += 1
        elif len(failures) < MAX_FAILURES:
            failures.append(failure_note(record, args.chunks) if stamped else "a content chunk without a numeric \"t\"")
        if not stamped:
            continue
        for k, (at_s, sent_ms) in enumerate(zip(at, sent)):
            arrival.append(round(at_s * 1000 - sent_ms, 4))
            if k == 0:
                continue
            gap = (at_s - at[k - 1]) * 1000
            sent_gap = sent_ms - sent[k - 1]
            itl_error.append(round(abs(gap - args.interval_ms), 4))
            client_error.append(round(abs(gap - sent_gap), 4))
            server_error.append(round(abs(sent_gap - args.interval_ms), 4))
    detail = None
    if args.detail:
        detail = [
            {
                "sha256": hashlib.sha256(json.dumps(payload).encode("utf-8")).hexdigest(),
                "gapsMs": [round((b - a) * 1000, 6) for a, b in zip(record.content_at, record.content_at[1:])],
            }
            for payload, record in zip(payloads, records)
        ]
    return {
        "mode": "itl",
        "requestsDetail": detail,
        "concurrency": args.concurrency,
        "requests": requests,
        "okRequests": ok_requests,
        "deadlineMs": deadline_s * 1000,
        "offeredTokens": requests * args.chunks,
        "deliveredTokens": delivered,
        "itlErrorMs": itl_error,
        "clientErrorMs": client_error,
        "serverErrorMs": server_error,
        "arrivalLatencyMs": arrival,
        "wallS": wall_s,
        "cpuS": cpu_s,
        "peakRssMB": peak_rss_mb(),
        "clock": time.get_clock_info("perf_counter").implementation,
        "vllm": vllm_metrics(records),
        "failures": failures,
    }


def positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number ≥ 1, got {text}")
    return value


def positive_float(text):
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text}")
    return value


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    modes = parser.add_subparsers(dest="mode", required=True)
    ingest = modes.add_parser("ingest", help="output tokens per second from a zero-delay server")
    ingest.add_argument("--url", required=True, help="server origin, e.g. http://127.0.0.1:8000")
    ingest.add_argument("--concurrency", type=positive_int, required=True)
    ingest.add_argument("--requests", type=positive_int, required=True, help="measured requests")
    ingest.add_argument("--tokens", type=positive_int, required=True, help="max_tokens per request")
    ingest.add_argument("--deadline-s", type=positive_float, required=True, help="per-request deadline")
    itl = modes.add_parser("itl", help="inter-token-latency error against a paced server")
    itl.add_argument("--url", required=True, help="server origin, e.g. http://127.0.0.1:8000")
    itl.add_argument("--concurrency", type=positive_int, required=True)
    itl.add_argument("--chunks", type=positive_int, required=True, help="token chunks per stream")
    itl.add_argument("--rounds", type=positive_int, required=True, help="requests per slot")
    itl.add_argument("--interval-ms", type=positive_float, required=True, help="the server's chunk interval")
    itl.add_argument("--deadline-factor", type=positive_float, default=1.5, help="deadline ÷ nominal stream time")
    itl.add_argument("--detail", action="store_true", help="per request: the body's sha256 and the content-chunk gaps")
    return parser.parse_args(argv)


def main(argv):
    args = parse_args(argv)
    allow_sockets(args.concurrency)
    result = run_ingest(args) if args.mode == "ingest" else run_itl(args)
    json.dump(result, sys.stdout, separators=(",", ":"))
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1:])
