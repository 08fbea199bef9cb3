import type { PrefixCacheReset } from '../schema/run.ts'

/** How long one reset call may take, ms: an engine empties its cache in well under a second. */
const RESET_TIMEOUT_MS = 30_000

/** The engine whose prefix cache is reset: its kind, origin and launch argv (null when not launched by servegate). */
export interface ResetTarget {
  /** The engine kind (`vllm`, `sglang`, `llama-server`, `trtllm`, `command`, `external`, …). */
  kind: string
  /** Loopback origin, e.g. `http://127.0.0.1:8000`. */
  baseUrl: string
  /** The argv it was launched with, as the manifest keeps it; null for an external endpoint. */
  argv: readonly string[] | null
  /** Sent as `Authorization: Bearer …` where the cell has one. */
  apiKey?: string | undefined
}

interface Reply {
  status: number
  body: string
}

/** One call; a network failure or timeout is a status of 0 with the error as its body. */
async function call(target: ResetTarget, method: 'GET' | 'POST', path: string, signal?: AbortSignal): Promise<Reply> {
  const headers: Record<string, string> = target.apiKey === undefined ? {} : { authorization: `Bearer ${target.apiKey}` }
  const timeout = AbortSignal.timeout(RESET_TIMEOUT_MS)
  try {
    const res = await fetch(`${target.baseUrl}${path}`, {
      method,
      headers,
      signal: signal === undefined ? timeout : AbortSignal.any([signal, timeout]),
    })
    return { status: res.status, body: (await res.text()).slice(0, 300) }
  } catch (error) {
    return { status: 0, body: (error as Error).message }
  }
}

/** A reply as a reason's evidence: `HTTP 400: body…`, or the network error. */
function answered(r: Reply): string {
  const body = r.body.trim().replace(/\s+/g, ' ')
  return r.status === 0 ? `no answer (${body})` : `HTTP ${r.status}${body === '' ? '' : `: ${body}`}`
}

const absent = (r: Reply): boolean => r.status === 404 || r.status === 405

const result = (status: PrefixCacheReset['status'], endpoints: string[], reason: string | null): PrefixCacheReset => ({
  status,
  endpoints,
  reason,
})

const VLLM_DEV_MODE =
  'vLLM serves POST /reset_prefix_cache only with VLLM_SERVER_DEV_MODE=1 in its environment ' +
  '(servegate sets it on the vLLM it launches unless its env says otherwise)'

/** vLLM's `POST /reset_prefix_cache` (its dev-mode route), which answers 200 with no body. */
async function vllmReset(target: ResetTarget, signal?: AbortSignal): Promise<PrefixCacheReset> {
  const endpoint = 'POST /reset_prefix_cache'
  const r = await call(target, 'POST', '/reset_prefix_cache', signal)
  if (r.status >= 200 && r.status < 300) return result('reset', [endpoint], null)
  if (absent(r)) return result('not-offered', [endpoint], `${endpoint}: ${answered(r)}; ${VLLM_DEV_MODE}`)
  return result('failed', [endpoint], `${endpoint}: ${answered(r)}`)
}

/** SGLang's `POST /flush_cache`, which it refuses with a 400 while requests run or wait. */
async function flushCache(target: ResetTarget, signal?: AbortSignal): Promise<PrefixCacheReset> {
  const endpoint = 'POST /flush_cache'
  const r = await call(target, 'POST', '/flush_cache', signal)
  if (r.status >= 200 && r.status < 300) return result('reset', [endpoint], null)
  if (absent(r)) return result('not-offered', [endpoint], `${endpoint}: ${answered(r)}`)
  return result('failed', [endpoint], `${endpoint}: ${answered(r)} (SGLang flushes only while no request runs or waits)`)
}

/** SGLang: `POST /reset_prefix_cache` where a release has it, else `POST /flush_cache`. */
async function sglangReset(target: ResetTarget, signal?: AbortSignal): Promise<PrefixCacheReset> {
  const endpoint = 'POST /reset_prefix_cache'
  const first = await call(target, 'POST', '/reset_prefix_cache', signal)
  if (first.status >= 200 && first.status < 300) return result('reset', [endpoint], null)
  if (!absent(first)) return result('failed', [endpoint], `${endpoint}: ${answered(first)}`)
  const flushed = await flushCache(target, signal)
  return { ...flushed, endpoints: [endpoint, ...flushed.endpoints] }
}

/** Whether a llama-server argv turns its host-memory prompt cache off (`--cache-ram 0`, `-cram 0`). */
function hostPromptCacheOff(argv: readonly string[] | null): boolean {
  if (argv === null) return false
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string
    const value = arg === '--cache-ram' || arg === '-cram' ? argv[i + 1] : /^(--cache-ram|-cram)=/.test(arg) ? arg.split('=')[1] : undefined
    if (value !== undefined) return Number(value) === 0
  }
  return false
}

const LLAMA_HOST_CACHE =
  "slots erased, but llama-server's host-memory prompt cache (--cache-ram, on by default in builds since October 2025) " +
  "has no endpoint to empty it: a request may still restore an earlier cell's prompt from it; launch with --cache-ram 0 to rule that out"

/** llama-server: `GET /slots`, then `POST /slots/{id}?action=erase` for each (it needs `--slot-save-path`). */
async function llamaServerReset(target: ResetTarget, signal?: AbortSignal): Promise<PrefixCacheReset> {
  const listed = await call(target, 'GET', '/slots', signal)
  const endpoints = ['GET /slots']
  if (listed.status !== 200) {
    const why = absent(listed) || listed.status === 501 ? 'not-offered' : 'failed'
    return result(why, endpoints, `GET /slots: ${answered(listed)} (llama-server lists its slots unless started with --no-slots)`)
  }
  let ids: number[]
  try {
    ids = (JSON.parse(listed.body) as Array<{ id?: unknown }>).map((s) => s.id).filter((id): id is number => Number.isInteger(id))
  } catch {
    return result('failed', endpoints, `GET /slots: not a JSON list of slots (${answered(listed)})`)
  }
  if (ids.length === 0) return result('failed', endpoints, 'GET /slots listed no slot')
  for (const id of ids) {
    const endpoint = `POST /slots/${id}?action=erase`
    endpoints.push(endpoint)
    const erased = await call(target, 'POST', `/slots/${id}?action=erase`, signal)
    if (erased.status === 501 || absent(erased)) {
      return result(
        'not-offered',
        endpoints,
        `${endpoint}: ${answered(erased)}; llama-server erases slots only when started with --slot-save-path`,
      )
    }
    if (erased.status !== 200) return result('failed', endpoints, `${endpoint}: ${answered(erased)}`)
  }
  return hostPromptCacheOff(target.argv) ? result('reset', endpoints, null) : result('partial', endpoints, LLAMA_HOST_CACHE)
}

/** An engine of unknown kind: vLLM's reset, SGLang's flush, llama-server's slot erase in turn; the first one it answers. */
async function probeReset(target: ResetTarget, signal?: AbortSignal): Promise<PrefixCacheReset> {
  const endpoints: string[] = []
  const reasons: string[] = []
  for (const reset of [vllmReset, flushCache, llamaServerReset]) {
    const r = await reset(target, signal)
    endpoints.push(...r.endpoints)
    if (r.status !== 'not-offered') return { ...r, endpoints }
    reasons.push(r.reason ?? '')
  }
  return result('not-offered', endpoints, `it answers none of vLLM's, SGLang's or llama-server's resets: ${reasons.join('; ')}`)
}

/**
 * Empties an engine's prefix cache as the engine offers it, and says how that went: vLLM's
 * `POST /reset_prefix_cache`; SGLang's, or `/flush_cache` on releases without it; llama-server's
 * slot erase (`GET /slots`, then `POST /slots/{id}?action=erase` for each); for a command or an
 * external endpoint, whichever of those it answers. TensorRT-LLM offers none. Never throws: a
 * reset that could not be done is a `not-offered` or `failed` result with the reason.
 * @example await resetPrefixCache({ kind: 'vllm', baseUrl: 'http://127.0.0.1:8000', argv: null }) // { status: 'reset', … }
 */
export async function resetPrefixCache(target: ResetTarget, signal?: AbortSignal): Promise<PrefixCacheReset> {
  switch (target.kind) {
    case 'vllm':
      return vllmReset(target, signal)
    case 'sglang':
      return sglangReset(target, signal)
    case 'llama-server':
      return llamaServerReset(target, signal)
    case 'trtllm':
      return result('not-offered', [], "TensorRT-LLM's trtllm-serve has no endpoint to empty its KV cache reuse")
    default:
      return probeReset(target, signal)
  }
}
