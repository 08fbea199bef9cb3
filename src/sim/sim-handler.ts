import type { IncomingMessage, ServerResponse } from 'node:http'
import { answerCacheEndpoint } from './cache-reset.ts'
import { errorBody, type SimApi } from './chunks.ts'
import { CompletionJob } from './completion-job.ts'
import { createFaultPlan, type FaultPlan } from './faults.ts'
import { metricsRoute, renderMetrics, versionRoutes } from './metrics.ts'
import { CachedPrompt, PrefixCache } from './prefix-cache.ts'
import { parseCompletionRequest, parseTokenizeRequest, promptTokenIds, type SimRequest } from './request-body.ts'
import { SimEngine } from './scheduler.ts'
import { preemptedAt, ServedTally, type SimStats } from './served-tally.ts'
import { SimGauges } from './sim-gauges.ts'
import { SimSpecDecode } from './spec-decode.ts'
import type { ResolvedSimOptions } from './sim-options.ts'
import { contextOverflow, kvOverflow, outputLength, streamPlan } from './stream-plan.ts'

/** Request bodies above this are answered 413; the largest real prompts are a few MiB. */
const MAX_BODY_BYTES = 64 * 1024 * 1024

const ROUTES: Record<string, { method: 'GET' | 'POST'; api?: SimApi }> = {
  '/health': { method: 'GET' },
  '/v1/models': { method: 'GET' },
  '/metrics': { method: 'GET' },
  '/prometheus/metrics': { method: 'GET' },
  '/version': { method: 'GET' },
  '/server_info': { method: 'GET' },
  '/get_server_info': { method: 'GET' },
  '/props': { method: 'GET' },
  '/tokenize': { method: 'POST' },
  '/v1/chat/completions': { method: 'POST', api: 'chat' },
  '/v1/completions': { method: 'POST', api: 'completions' },
}

/**
 * The simulated engine's HTTP side, one per server: routes each request, answers the info and
 * metrics endpoints, tokenizes, and turns each accepted completion into a job its scheduler
 * steps, counting all of it. Its methods are the server's events (`connected`, `request`) and
 * its end (`close`); the listening socket is `startSimServer`'s.
 * @example const handler = new SimHandler(resolveSimOptions({})); createServer((req, res) => handler.request(req, res))
 */
export class SimHandler {
  readonly #opts: ResolvedSimOptions
  readonly #tally: ServedTally
  readonly #gauges: SimGauges
  readonly #engine: SimEngine
  readonly #faultPlan: FaultPlan
  readonly #cache: PrefixCache
  readonly #spec: SimSpecDecode | null
  readonly #jobs = new Set<CompletionJob>()
  readonly #startedS = Math.floor(Date.now() / 1000)
  #closed = false

  constructor(opts: ResolvedSimOptions) {
    this.#opts = opts
    this.#tally = new ServedTally(opts.prefillTokPerS)
    const source = {
      running: () => this.#engine.running(),
      leaked: () => this.#engine.leaked(),
      reservedTokens: () => this.#engine.reservedTokens(),
      openStreams: () => this.#jobs.size,
    }
    this.#gauges = new SimGauges(opts, source)
    this.#engine = new SimEngine(opts, undefined, this.#gauges.hooks)
    this.#faultPlan = createFaultPlan(opts)
    this.#cache = new PrefixCache(opts.prefixCacheTokens, opts.prefixBlockTokens)
    this.#spec = opts.speculative === null ? null : new SimSpecDecode(opts.speculative)
  }

  /** The server accepted a TCP connection. */
  connected(): void {
    this.#tally.connected()
  }

  /** Answers one request; an unexpected error becomes a 500. */
  request(req: IncomingMessage, res: ServerResponse): void {
    this.#handle(req, res).catch((error: unknown) => {
      sendError(res, 500, `sim internal error: ${error instanceof Error ? error.message : String(error)}`)
    })
  }

  /** The counters so far. */
  stats(): SimStats {
    return this.#tally.stats(this.#jobs.size, this.#engine)
  }

  /** Stops the scheduler and ends every open stream; later completions are not served. */
  close(): void {
    this.#closed = true
    this.#engine.close()
    for (const job of this.#jobs) job.stream.dispose()
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    req.socket.setNoDelay(true)
    const url = new URL(req.url ?? '/', 'http://sim.invalid')
    const path = url.pathname
    if (this.#cacheEndpoint(req, res, path, url.searchParams)) return
    const route = ROUTES[path]
    if (!route) {
      return sendError(res, 404, `no route ${req.method ?? ''} ${path}; the sim serves ${Object.keys(ROUTES).join(', ')}`)
    }
    if (req.method !== route.method) return sendError(res, 405, `${path} takes ${route.method}, not ${req.method ?? ''}`)
    if (path === '/health') {
      res.writeHead(200, { 'content-length': 0 }).end()
      return
    }
    if (path === '/metrics' || path === '/prometheus/metrics') return this.#metrics(res, path)
    if (route.method === 'GET') return this.#info(res, path)
    const body = await readJson(req)
    if (!body.ok) return sendError(res, body.status, body.message)
    if (!route.api) return this.#tokenize(res, body.value)
    this.#complete(req, res, route.api, body.value)
  }

  /** Answers the dialect's prefix-cache endpoints (see `answerCacheEndpoint`); false for any other path. */
  #cacheEndpoint(req: IncomingMessage, res: ServerResponse, path: string, query: URLSearchParams): boolean {
    const { dialect, maxBatch, maxModelLen, cacheReset } = this.#opts
    const state = { cache: this.#cache, busy: this.#jobs.size > 0, slots: maxBatch ?? 1, cacheReset, slotContextTokens: maxModelLen }
    const reply = answerCacheEndpoint(dialect, req.method ?? '', path, query, state)
    if (reply === null) return false
    // Their bodies, if any, are not read; drain them so the connection can be reused.
    req.resume()
    res.writeHead(reply.status, { 'content-type': reply.contentType, 'content-length': Buffer.byteLength(reply.body) }).end(reply.body)
    return true
  }

  #metrics(res: ServerResponse, path: string): void {
    const { dialect } = this.#opts
    // TensorRT-LLM mounts /prometheus/metrics only with return_perf_metrics; its /metrics is JSON iteration stats.
    if (path !== metricsRoute(dialect) || (dialect === 'trtllm' && !this.#opts.perfMetrics)) {
      return dialect === 'trtllm' && path === '/metrics' ? sendJson(res, 200, '[]') : sendError(res, 404, 'Not Found')
    }
    const counters = this.#tally.counters(this.#gauges.read(), this.#cache.counters())
    const shape = { version: this.#opts.version, iterationStats: this.#opts.iterationStats }
    res
      .writeHead(200, { 'content-type': 'text/plain; version=0.0.4' })
      .end(renderMetrics(dialect, this.#opts.model, counters, this.#tally.timings, shape, this.#spec?.counters() ?? null))
  }

  /** The version endpoints of the dialect, and the model list. */
  #info(res: ServerResponse, path: string): void {
    const version = versionRoutes(this.#opts.dialect, this.#opts.version)
    if (version.paths.includes(path)) return sendJson(res, 200, JSON.stringify(version.body))
    if (path !== '/v1/models') return sendError(res, 404, 'Not Found')
    const { model: id, maxModelLen } = this.#opts
    const model = { id, object: 'model', created: this.#startedS, owned_by: 'servegate-sim', max_model_len: maxModelLen }
    sendJson(res, 200, JSON.stringify({ object: 'list', data: [model] }))
  }

  #tokenize(res: ServerResponse, body: unknown): void {
    if (this.#opts.noTokenize) return sendError(res, 404, 'Not Found')
    this.#tally.tokenized()
    const parsed = parseTokenizeRequest(body)
    if (!parsed.ok) return sendError(res, 400, parsed.message)
    if (!this.#checkModel(res, parsed.model)) return
    const { maxModelLen } = this.#opts
    sendJson(res, 200, JSON.stringify({ count: parsed.tokens.length, max_model_len: maxModelLen, tokens: parsed.tokens }))
  }

  #checkModel(res: ServerResponse, model: string | null): boolean {
    if (model === null || model === this.#opts.model) return true
    sendError(res, 404, `The model \`${model}\` does not exist.`, 'model')
    return false
  }

  #complete(req: IncomingMessage, res: ServerResponse, api: SimApi, body: unknown): void {
    const parsed = parseCompletionRequest(api, body)
    if (!parsed.ok) return sendError(res, 400, parsed.message)
    const request = parsed.request
    if (!this.#checkModel(res, request.model)) return
    const refusal = this.#refusal(request)
    if (refusal !== null) return sendError(res, 400, refusal.message, refusal.param)
    if (this.#closed || res.destroyed || req.socket.destroyed) return

    const index = this.#tally.requests
    const fault = this.#faultPlan(index)
    this.#tally.accepted(fault)
    if (fault === 'http500') return sendError(res, 500, `simulated fault http500 on request ${index}`)
    if (fault === 'http429') {
      return sendError(res, 429, `simulated fault http429 on request ${index}; retry later`, null, { 'retry-after': '2' })
    }
    const prompt = this.#cache.enabled ? new CachedPrompt(this.#cache, () => promptTokenIds(request)) : null
    const job = new CompletionJob(
      res,
      streamPlan(this.#opts, request, index, fault),
      fault !== null,
      (ended) => {
        this.#jobs.delete(job)
        this.#tally.ended(ended)
        this.#spec?.add(ended.emittedTokens)
      },
      prompt,
    )
    this.#jobs.add(job)
    this.#tally.opened(request.promptTokens, this.#jobs.size)
    if (preemptedAt(index, this.#opts.preemptionShare)) this.#tally.preempted()
    res.on('close', () => {
      // The client went away (or the reply ended): the engine frees the job, unless it leaks on abort.
      this.#engine.cancel(job, this.#opts.leakKvOnAbort)
      job.stream.dispose()
    })
    job.stream.open()
    this.#engine.submit(job)
  }

  /** Why a streaming request is refused before it is served (the engine's own 400s); null when it is served. */
  #refusal(request: SimRequest): { message: string; param: string } | null {
    const promptParam = request.api === 'chat' ? 'messages' : 'prompt'
    if (!request.stream) {
      return { message: 'stream: the simulated engine serves streaming requests only; set "stream": true', param: 'stream' }
    }
    const tooLong = contextOverflow(request, this.#opts.maxModelLen)
    if (tooLong) return { message: tooLong, param: promptParam }
    const neverFits = kvOverflow(request.promptTokens, outputLength(this.#opts, request).tokens, this.#opts.kvBudgetTokens)
    if (neverFits) return { message: neverFits, param: promptParam }
    return null
  }
}

type JsonBody = { ok: true; value: unknown } | { ok: false; status: number; message: string }

async function readJson(req: IncomingMessage): Promise<JsonBody> {
  const chunks: Buffer[] = []
  let bytes = 0
  for await (const chunk of req as AsyncIterable<Buffer>) {
    bytes += chunk.length
    // Keep draining past the limit so the 413 can still be written on this connection.
    if (bytes <= MAX_BODY_BYTES) chunks.push(chunk)
  }
  if (bytes > MAX_BODY_BYTES) {
    return { ok: false, status: 413, message: `body: ${bytes} bytes is over the sim's limit of ${MAX_BODY_BYTES}` }
  }
  try {
    return { ok: true, value: JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown }
  } catch (error) {
    return { ok: false, status: 400, message: `body: not valid JSON (${(error as Error).message})` }
  }
}

function sendJson(res: ServerResponse, status: number, body: string, headers: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) return
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers })
  res.end(body)
}

function sendError(
  res: ServerResponse,
  status: number,
  message: string,
  param: string | null = null,
  headers: Record<string, string> = {},
): void {
  sendJson(res, status, errorBody(status, message, param), headers)
}
