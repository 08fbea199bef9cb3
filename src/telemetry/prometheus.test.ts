import { readFileSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, test } from 'vitest'
import type { EngineKind, EngineOccupancy } from '../schema/telemetry.ts'
import { type SimServer, startSimServer } from '../sim/server.ts'
import { parseExposition } from './exposition.ts'
import {
  ENGINE_METRIC_NAMES,
  metricsUrl,
  preemptionsOver,
  reachedConcurrency,
  readEngineMetrics,
  startMetricsScraper,
  timingDeltas,
} from './prometheus.ts'

const fixture = (path: string): string => readFileSync(fileURLToPath(new URL(`../../fixtures/${path}`, import.meta.url)), 'utf8')
const VLLM = fixture('metrics/vllm.txt')
const SGLANG = fixture('metrics/sglang.txt')
const LLAMACPP = fixture('metrics/llamacpp.txt')
/** Captured from a real llama-server (built from the llama.cpp source node-llama-cpp ships) under load. */
const LLAMA_SERVER_CAPTURED = fixture('models/llama-server-metrics.txt')

/** The same exposition with every sample's value replaced: a freshly started engine. */
function zeroed(text: string): string {
  return text.replace(/^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{.*\})?) \S+$/gm, '$1 0.0')
}

/** The same exposition with the samples named in `values` (any labels) set to those values. */
function withValues(text: string, values: Record<string, number>): string {
  return text.replace(/^([a-zA-Z_:][a-zA-Z0-9_:]*)((?:\{.*\})?) \S+$/gm, (line, name: string, labels: string) =>
    name in values ? `${name}${labels} ${values[name]}` : line,
  )
}

const SGLANG_DECODE_REASON = ENGINE_METRIC_NAMES.sglang.decodeSeconds.name === null ? ENGINE_METRIC_NAMES.sglang.decodeSeconds.reason : ''

const LLAMA_LINE = '; the scrape shows a llama.cpp build after PR #13660 (May 2025: no KV-usage gauge)'

const LLAMA_KV_REASON =
  "llamacpp:kv_cache_usage_ratio is not in the engine's metrics " +
  '(llama.cpp removed llamacpp:kv_cache_usage_ratio and kv_cache_tokens from /metrics in PR #13660 (May 2025); only older builds expose it); ' +
  'the scrape shows a llama.cpp build after PR #13660 (May 2025: no KV-usage gauge)'

const EXPECTED: Array<
  [string, EngineKind, string, Omit<EngineOccupancy, 'url' | 'intervalMs' | 'scrapes' | 'scrapeErrors' | 'lastScrapeError' | 'kind'>]
> = [
  [
    'vLLM',
    'vllm',
    VLLM,
    {
      runningMax: 4,
      waitingMax: 2,
      kvUsageMax: 0.4211,
      preemptions: 3,
      timings: {
        windowMs: expect.any(Number) as unknown as number,
        prefill: { secondsSum: 7.1728, count: 16 },
        decode: { secondsSum: 61.44, count: 16 },
        ttft: { secondsSum: 9.6004, count: 16 },
        queue: { secondsSum: 0.4096, count: 16 },
        promptTokens: 163840,
        generationTokens: 4096,
      },
      reasons: {},
    },
  ],
  [
    'SGLang',
    'sglang',
    SGLANG,
    {
      runningMax: 4,
      waitingMax: 2,
      kvUsageMax: 0.42,
      preemptions: 2,
      timings: {
        windowMs: expect.any(Number) as unknown as number,
        prefill: { secondsSum: 6.7432, count: 16 },
        decode: null,
        ttft: { secondsSum: 9.31, count: 16 },
        queue: { secondsSum: 0.35, count: 16 },
        promptTokens: 163840,
        generationTokens: 4096,
      },
      reasons: { 'timings.decode': `${SGLANG_DECODE_REASON}; the scrape shows a SGLang 0.5.x metric set (with per-stage histograms)` },
    },
  ],
  ...(['llama-server (fixture)', 'llama-server (captured)'] as const).map(
    (
      label,
    ): [
      string,
      EngineKind,
      string,
      Omit<EngineOccupancy, 'url' | 'intervalMs' | 'scrapes' | 'scrapeErrors' | 'lastScrapeError' | 'kind'>,
    ] => {
      const captured = label === 'llama-server (captured)'
      return [
        label,
        'llama-server',
        captured ? LLAMA_SERVER_CAPTURED : LLAMACPP,
        {
          runningMax: 2,
          waitingMax: 1,
          kvUsageMax: null,
          preemptions: null,
          timings: {
            windowMs: expect.any(Number) as unknown as number,
            prefill: { secondsSum: captured ? 0.011416 : 12.8456, count: null },
            decode: { secondsSum: captured ? 6.05638 : 30.7213, count: null },
            ttft: null,
            queue: null,
            promptTokens: captured ? 417 : 40960,
            generationTokens: captured ? 7732 : 2048,
          },
          reasons: {
            kvUsageMax: LLAMA_KV_REASON,
            preemptions: `llama-server exports no preemption counter: a request keeps its slot (--parallel) until it ends${LLAMA_LINE}`,
            'timings.ttft': `llama-server exposes no time-to-first-token metric${LLAMA_LINE}`,
            'timings.queue': `llama-server exposes no queue time, only the deferred request count${LLAMA_LINE}`,
          },
        },
      ]
    },
  ),
]

describe('readEngineMetrics on real-shaped /metrics', () => {
  test.each(EXPECTED)('%s', (_label, kind, text, expected) => {
    const reading = readEngineMetrics(parseExposition(text), kind)
    expect(reading).toEqual({
      running: expected.runningMax,
      waiting: expected.waitingMax,
      kvUsage: expected.kvUsageMax,
      timings: {
        prefill: expected.timings.prefill,
        decode: expected.timings.decode,
        ttft: expected.timings.ttft,
        queue: expected.timings.queue,
      },
      promptTokens: expected.timings.promptTokens,
      generationTokens: expected.timings.generationTokens,
      preemptions: expected.preemptions,
      // Current llama.cpp exports its speculative decoding counters always, at 0 without a draft model.
      specDecode: kind === 'llama-server' ? expect.objectContaining({ drafts: 0, draftTokens: 0, acceptedTokens: 0 }) : null,
      line: expect.any(String),
    })
  })

  test('vLLM before 0.9: KV usage from the old vllm:gpu_cache_usage_perc', () => {
    const old = 'vllm:gpu_cache_usage_perc{model_name="m"} 0.25\nvllm:num_requests_running{model_name="m"} 1.0\n'
    expect(readEngineMetrics(parseExposition(old), 'vllm')).toMatchObject({ kvUsage: 0.25, running: 1, waiting: null })
  })

  test('data-parallel ranks are summed, tensor-parallel duplicates are not', () => {
    const vllm =
      'vllm:num_requests_running{engine="0",model_name="m"} 3.0\nvllm:num_requests_running{engine="1",model_name="m"} 4.0\n' +
      'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.2\nvllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.7\n'
    expect(readEngineMetrics(parseExposition(vllm), 'vllm')).toMatchObject({ running: 7, kvUsage: 0.7 })
    const tp = 'sglang:num_running_reqs{model_name="m",tp_rank="0"} 4.0\nsglang:num_running_reqs{model_name="m",tp_rank="1"} 4.0\n'
    expect(readEngineMetrics(parseExposition(tp), 'sglang').running).toBe(4)
    const dp =
      'sglang:num_queue_reqs{dp_rank="0",model_name="m",tp_rank="0"} 2.0\n' +
      'sglang:num_queue_reqs{dp_rank="1",model_name="m",tp_rank="0"} 5.0\n'
    expect(readEngineMetrics(parseExposition(dp), 'sglang').waiting).toBe(7)
  })

  test('series of another served model are left out; NaN gauges are no reading', () => {
    const text =
      'vllm:num_requests_running{model_name="a"} 3.0\nvllm:num_requests_running{model_name="b"} 9.0\n' +
      'vllm:kv_cache_usage_perc{model_name="a"} NaN\n'
    expect(readEngineMetrics(parseExposition(text), 'vllm', 'a')).toMatchObject({ running: 3, kvUsage: null })
  })

  test('every engine kind names where its metrics live', () => {
    expect(metricsUrl('http://127.0.0.1:8000', 'vllm')).toBe('http://127.0.0.1:8000/metrics')
    expect(metricsUrl('http://127.0.0.1:8000', 'trtllm')).toBe('http://127.0.0.1:8000/prometheus/metrics')
    expect(ENGINE_METRIC_NAMES.trtllm.running).toMatchObject({ name: 'trtllm_num_requests_running' })
  })
})

interface FakeEndpoint {
  url: string
  served(): number
  waitServed(n: number): Promise<void>
}

const servers: Server[] = []
const sims: SimServer[] = []
afterEach(async () => {
  await Promise.all(sims.splice(0).map((s) => s.close()))
  await Promise.all(
    servers.splice(0).map(
      (s) =>
        new Promise<void>((resolve) => {
          s.closeAllConnections()
          s.close(() => resolve())
        }),
    ),
  )
})

/** A loopback /metrics endpoint; `respond` gets the 1-based request number. */
async function serve(respond: (n: number) => { status?: number; body: string }): Promise<FakeEndpoint> {
  let served = 0
  const server = createServer((req, res) => {
    served++
    const { status = 200, body } = respond(served)
    res.writeHead(status, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' })
    res.end(body)
  })
  servers.push(server)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}/metrics`,
    served: () => served,
    async waitServed(n) {
      const deadline = Date.now() + 10_000
      while (served < n) {
        if (Date.now() > deadline) throw new Error(`only ${served} scrapes, expected ${n}`)
        await sleep(5)
      }
    },
  }
}

describe('startMetricsScraper against a loopback /metrics', () => {
  test.each(EXPECTED)('%s: idle, load, drain — maxima and exact deltas since the load start', async (_label, kind, text, expected) => {
    let phase: 'idle' | 'load' | 'drain' = 'idle'
    const drained = withValues(text, {
      'vllm:num_requests_running': 0,
      'vllm:num_requests_waiting': 0,
      'sglang:num_running_reqs': 0,
      'sglang:num_queue_reqs': 0,
      'llamacpp:requests_processing': 0,
      'llamacpp:requests_deferred': 0,
    })
    const endpoint = await serve(() => ({ body: phase === 'idle' ? zeroed(text) : phase === 'load' ? text : drained }))
    const scraper = startMetricsScraper({ url: endpoint.url, kind, intervalMs: 20 })
    await endpoint.waitServed(1)
    await scraper.markLoadStart()
    phase = 'load'
    await endpoint.waitServed(endpoint.served() + 2)
    phase = 'drain'
    await endpoint.waitServed(endpoint.served() + 1)
    const occupancy = await scraper.stop()
    expect(occupancy).toEqual({
      kind,
      url: endpoint.url,
      intervalMs: 20,
      scrapes: endpoint.served(),
      scrapeErrors: 0,
      lastScrapeError: null,
      ...expected,
    })
    expect(occupancy.timings.windowMs).toBeGreaterThan(0)
    expect(await scraper.stop()).toBe(occupancy)
  })

  test('counters that did not start at zero are differenced from the load-start scrape', async () => {
    let phase: 'before' | 'after' = 'before'
    const before = withValues(VLLM, {
      'vllm:request_prefill_time_seconds_sum': 1.25,
      'vllm:request_prefill_time_seconds_count': 2,
      'vllm:prompt_tokens_total': 20480,
    })
    const endpoint = await serve(() => ({ body: phase === 'before' ? before : VLLM }))
    const scraper = startMetricsScraper({ url: endpoint.url, kind: 'vllm', intervalMs: 20 })
    await scraper.markLoadStart()
    phase = 'after'
    await endpoint.waitServed(endpoint.served() + 1)
    const { timings } = await scraper.stop()
    expect(timings.prefill?.count).toBe(14)
    expect(timings.prefill?.secondsSum).toBeCloseTo(7.1728 - 1.25, 12)
    expect(timings.promptTokens).toBe(163840 - 20480)
    expect(timings.decode).toEqual({ secondsSum: 0, count: 0 })
  })

  test('failed scrapes are counted, never fatal', async () => {
    const endpoint = await serve((n) => (n <= 2 ? { status: 500, body: 'Internal Server Error' } : { body: VLLM }))
    const scraper = startMetricsScraper({ url: endpoint.url, kind: 'vllm', intervalMs: 10 })
    await endpoint.waitServed(4)
    const occupancy = await scraper.stop()
    expect(occupancy).toMatchObject({
      scrapes: endpoint.served() - 2,
      scrapeErrors: 2,
      lastScrapeError: `${endpoint.url} answered HTTP 500: Internal Server Error`,
      runningMax: 4,
    })
  })

  test('llama-server started without --metrics: every figure null, the 501 kept as the reason', async () => {
    const body = JSON.stringify({
      error: {
        code: 501,
        message: 'This server does not support metrics endpoint. Start it with `--metrics`',
        type: 'not_supported_error',
      },
    })
    const endpoint = await serve(() => ({ status: 501, body }))
    const scraper = startMetricsScraper({ url: endpoint.url, kind: 'llama-server', intervalMs: 10 })
    await endpoint.waitServed(2)
    const occupancy = await scraper.stop()
    const errors = endpoint.served()
    const last = `${endpoint.url} answered HTTP 501: ${body}`
    const why = `no successful scrape of ${endpoint.url} (${errors} failed; last: ${last})`
    expect(occupancy).toEqual({
      kind: 'llama-server',
      url: endpoint.url,
      intervalMs: 10,
      scrapes: 0,
      scrapeErrors: errors,
      lastScrapeError: last,
      runningMax: null,
      waitingMax: null,
      kvUsageMax: null,
      preemptions: null,
      timings: { windowMs: null, prefill: null, decode: null, ttft: null, queue: null, promptTokens: null, generationTokens: null },
      reasons: {
        runningMax: why,
        waitingMax: why,
        kvUsageMax: why,
        preemptions: why,
        'timings.windowMs': why,
        'timings.prefill': why,
        'timings.decode': why,
        'timings.ttft': why,
        'timings.queue': why,
        'timings.promptTokens': why,
        'timings.generationTokens': why,
      },
    })
    expect(reachedConcurrency(occupancy, 4)).toEqual({ requested: 4, runningMax: null, reached: null, reason: why })
  })

  test('nothing listening: refused scrapes counted', async () => {
    const endpoint = await serve(() => ({ body: '' }))
    const server = servers.pop() as Server
    await new Promise<void>((resolve) => server.close(() => resolve()))
    const scraper = startMetricsScraper({ url: endpoint.url, kind: 'vllm', intervalMs: 10 })
    await sleep(50)
    const occupancy = await scraper.stop()
    expect(occupancy.scrapes).toBe(0)
    expect(occupancy.scrapeErrors).toBeGreaterThanOrEqual(2)
    expect(occupancy.lastScrapeError).toMatch(/ECONNREFUSED|connect/)
  })

  test('an engine restart (counters going backwards) is no delta', async () => {
    let restarted = false
    const endpoint = await serve(() => ({ body: restarted ? zeroed(VLLM) : VLLM }))
    const scraper = startMetricsScraper({ url: endpoint.url, kind: 'vllm', intervalMs: 20 })
    await scraper.markLoadStart()
    restarted = true
    await endpoint.waitServed(endpoint.served() + 1)
    const { timings, reasons } = await scraper.stop()
    expect(timings.prefill).toBeNull()
    expect(timings.promptTokens).toBeNull()
    expect(reasons['timings.prefill']).toBe('the counter went backwards between scrapes (engine restarted?)')
  })

  test('the caller aborting stops scraping without a last scrape', async () => {
    const endpoint = await serve(() => ({ body: VLLM }))
    const controller = new AbortController()
    const scraper = startMetricsScraper({ url: endpoint.url, kind: 'vllm', intervalMs: 10, signal: controller.signal })
    await endpoint.waitServed(2)
    controller.abort()
    const occupancy = await scraper.stop()
    // A scrape already on the wire when the caller aborted may still reach the server; let it land.
    await sleep(30)
    const served = endpoint.served()
    await sleep(60)
    expect(endpoint.served()).toBe(served)
    expect(occupancy.scrapeErrors).toBe(0)
  })

  test('rejects a non-positive interval', () => {
    expect(() => startMetricsScraper({ url: 'http://127.0.0.1:1/metrics', kind: 'vllm', intervalMs: -1 })).toThrow(RangeError)
  })
})

describe("the simulated engine's /metrics", () => {
  test.each([
    ['vllm', '0.11.0', 0],
    ['sglang', '0.5.3', 0],
    // Current llama.cpp has no KV-usage gauge (removed in PR #13660).
    ['llama-server', 'b6543', null],
    ['trtllm', '1.3.0', 0],
  ] as const)('%s dialect: every gauge and counter it serves is read', async (dialect, version, kv) => {
    const sim = await startSimServer({ model: 'm', dialect, version })
    sims.push(sim)
    const scraper = startMetricsScraper({ url: metricsUrl(sim.url, dialect), kind: dialect, intervalMs: 20, modelName: 'm' })
    await scraper.markLoadStart()
    await sleep(60)
    const occupancy = await scraper.stop()
    expect(occupancy).toMatchObject({ scrapeErrors: 0, runningMax: 0, waitingMax: 0, kvUsageMax: kv })
    expect(occupancy.timings).toMatchObject({ promptTokens: 0, generationTokens: 0 })
  })
})

describe('timingDeltas', () => {
  test('one scrape is no interval', () => {
    const only = { atMs: 5, reading: readEngineMetrics(parseExposition(VLLM), 'vllm') }
    const { timings, reasons } = timingDeltas(only, only, 'vllm')
    expect(timings.prefill).toBeNull()
    expect(reasons['timings.prefill']).toBe('only one successful scrape since the load started: no interval to difference')
  })

  test("a metric the engine's build lacks is named with its history", () => {
    const a = { atMs: 0, reading: readEngineMetrics(parseExposition('vllm:num_requests_running 1'), 'vllm') }
    const b = { atMs: 10, reading: a.reading }
    expect(timingDeltas(a, b, 'vllm').reasons['timings.prefill']).toBe(
      "vllm:request_prefill_time_seconds is not in the engine's metrics (V1 engine: first scheduled → first token, queueing excluded)",
    )
    expect(timingDeltas(a, b, 'sglang').reasons['timings.decode']).toMatch(
      /^SGLang exports no per-request decode time: .*decode_loop and decode_forward are tracing spans only .*0\.5\.x/,
    )
    expect(timingDeltas(a, b, 'trtllm').reasons['timings.prefill']).toBe(
      "trtllm_request_prefill_time_seconds is not in the engine's metrics " +
        '(first scheduled → first token, 1.3 line; releases up to 1.2 export no prefill histogram)',
    )
  })
})

describe('preemptionsOver: the preemption (SGLang: retraction) counter over the load window', () => {
  const at = (atMs: number, text: string, kind: EngineKind) => ({ atMs, reading: readEngineMetrics(parseExposition(text), kind) })
  const vllm = (n: number, engine = '0'): string => `vllm:num_preemptions_total{engine="${engine}",model_name="m"} ${n}\n`
  const sglang = (n: number, labels = 'model_name="m",tp_rank="0"'): string => `sglang:num_retracted_requests_total{${labels}} ${n}\n`

  test("vLLM's counter grows from the load-start reading to the last", () => {
    expect(preemptionsOver(at(0, vllm(3), 'vllm'), at(10, vllm(10), 'vllm'), 'vllm')).toEqual({ preemptions: 7, reason: null })
    // Data-parallel engines add up.
    const dp = (a: number, b: number): string => vllm(a, '0') + vllm(b, '1')
    expect(preemptionsOver(at(0, dp(1, 2), 'vllm'), at(10, dp(4, 9), 'vllm'), 'vllm').preemptions).toBe(10)
    // The registered name, as an exporter that does not append _total shows it.
    const bare = (n: number): string => `vllm:num_preemptions{model_name="m"} ${n}\n`
    expect(preemptionsOver(at(0, bare(1), 'vllm'), at(10, bare(6), 'vllm'), 'vllm').preemptions).toBe(5)
  })

  test("SGLang's counter: created at the first retraction, counted from 0; TP ranks repeat it, DP ranks add up", () => {
    const idle = 'sglang:num_running_reqs{model_name="m"} 0\n'
    expect(preemptionsOver(at(0, idle, 'sglang'), at(10, sglang(4), 'sglang'), 'sglang')).toEqual({ preemptions: 4, reason: null })
    const tp = sglang(6, 'model_name="m",tp_rank="0"') + sglang(6, 'model_name="m",tp_rank="1"')
    expect(preemptionsOver(at(0, idle, 'sglang'), at(10, tp, 'sglang'), 'sglang').preemptions).toBe(6)
    const dp = sglang(2, 'dp_rank="0",model_name="m"') + sglang(3, 'dp_rank="1",model_name="m"')
    expect(preemptionsOver(at(0, idle, 'sglang'), at(10, dp, 'sglang'), 'sglang').preemptions).toBe(5)
  })

  test('no counter, one reading, or a restart: null with the reason', () => {
    const idle = 'sglang:num_running_reqs{model_name="m"} 0\n'
    const none = preemptionsOver(at(0, idle, 'sglang'), at(10, idle, 'sglang'), 'sglang')
    expect(none.preemptions).toBeNull()
    expect(none.reason).toMatch(/^sglang:num_retracted_requests_total is not in the engine's metrics \(.*first retraction/)
    const only = at(0, vllm(3), 'vllm')
    expect(preemptionsOver(only, only, 'vllm').reason).toBe('only one successful scrape since the load started: no interval to difference')
    expect(preemptionsOver(at(0, vllm(9), 'vllm'), at(10, vllm(0), 'vllm'), 'vllm')).toEqual({
      preemptions: null,
      reason: 'the counter went backwards between scrapes (engine restarted?)',
    })
    expect(preemptionsOver(null, null, 'vllm').reason).toBe('no successful scrape')
    expect(preemptionsOver(at(0, '', 'trtllm'), at(10, '', 'trtllm'), 'trtllm').reason).toBe(
      "trtllm-serve's Prometheus text (metrics/collector.py) has no preemption counter",
    )
  })
})

function occupancyWith(runningMax: number | null, waitingMax: number | null, scrapes: number): EngineOccupancy {
  return {
    kind: 'vllm',
    url: 'http://127.0.0.1:8000/metrics',
    intervalMs: 250,
    scrapes,
    scrapeErrors: 0,
    lastScrapeError: null,
    runningMax,
    waitingMax,
    kvUsageMax: null,
    preemptions: null,
    timings: { windowMs: null, prefill: null, decode: null, ttft: null, queue: null, promptTokens: null, generationTokens: null },
    reasons: runningMax === null ? { runningMax: "vllm:num_requests_running is not in the engine's metrics" } : {},
  }
}

describe('reachedConcurrency', () => {
  test('reached', () => {
    expect(reachedConcurrency(occupancyWith(8, 0, 40), 8)).toEqual({
      requested: 8,
      runningMax: 8,
      reached: true,
      reason: 'the engine ran 8 requests at once (requested 8)',
    })
    expect(reachedConcurrency(occupancyWith(9, 0, 40), 8).reason).toMatch(/more than requested/)
  })

  test('not reached because the engine queued: its batch limit is below the concurrency', () => {
    expect(reachedConcurrency(occupancyWith(4, 4, 40), 8)).toEqual({
      requested: 8,
      runningMax: 4,
      reached: false,
      reason:
        'the engine ran at most 4 of 8 requests at once over 40 scrapes every 250 ms; up to 4 waited in its queue: ' +
        'its batch limit (max-num-seqs, max-running-requests, --parallel slots…) is below the requested concurrency',
    })
  })

  test('not reached with nothing queued: the client did not keep the requests in flight', () => {
    expect(reachedConcurrency(occupancyWith(3, 0, 40), 8).reason).toMatch(
      /none waited in its queue: the client did not keep the requests in flight/,
    )
  })

  test('too few scrapes, or no running gauge: null with the reason', () => {
    expect(reachedConcurrency(occupancyWith(2, 0, 2), 8)).toEqual({
      requested: 8,
      runningMax: 2,
      reached: null,
      reason: 'only 2 successful scrape(s): a peak of 8 may have fallen between them',
    })
    expect(reachedConcurrency(occupancyWith(null, null, 40), 8)).toEqual({
      requested: 8,
      runningMax: null,
      reached: null,
      reason: "vllm:num_requests_running is not in the engine's metrics",
    })
  })

  test('a wrong argument throws a TypeError', () => {
    expect(() => reachedConcurrency(occupancyWith(1, 0, 5), 0)).toThrow(TypeError)
  })
})
