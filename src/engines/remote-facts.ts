/**
 * What a remote endpoint says about itself: which engine answers and its key server arguments,
 * read from the engines' own endpoints, each fact with its source or the reason it is null.
 * - SGLang `GET /get_server_info` (`python/sglang/srt/entrypoints/http_server.py`): its server
 *   arguments (`model_path`, `served_model_name`, `tp_size`, `context_length`…), scheduler info,
 *   `internal_states` and `version`, in one object;
 * - `GET /v1/models`: each engine's model card names its owner (`owned_by` "vllm", "sglang",
 *   "tensorrt_llm"), vLLM's and SGLang's also `root` (the weights) and `max_model_len`;
 * - `GET /metrics`: vLLM's `vllm:` and SGLang's `sglang:` names.
 */
import { httpRequest } from '../http-request.ts'
import type { Manifest } from '../schema/manifest.ts'

type Reported = NonNullable<Manifest['engine']['reported']>
type ReportedKind = NonNullable<Reported['kind']['value']>

/** What the endpoint answered, each null where it did not (not 200, not JSON). */
export interface EndpointAnswers {
  /** `GET /get_server_info` as SGLang answers it. */
  serverInfo: Record<string, unknown> | null
  /** `GET /v1/models`. */
  models: Record<string, unknown> | null
  /** `GET /metrics`, the text. */
  metrics: string | null
}

/** `/v1/models` `owned_by` values an engine writes for itself (vLLM, SGLang and TensorRT-LLM's protocol.py). */
const OWNERS: Record<string, ReportedKind> = { vllm: 'vllm', sglang: 'sglang', tensorrt_llm: 'trtllm' }
/** Metric name prefixes (`/metrics`) that name their engine. */
const METRIC_PREFIXES: ReadonlyArray<[string, ReportedKind]> = [
  ['vllm:', 'vllm'],
  ['sglang:', 'sglang'],
]

const positiveInt = (v: unknown): number | null => (typeof v === 'number' && Number.isInteger(v) && v > 0 ? v : null)
const nonEmpty = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null)

/** SGLang's answer: a `version` beside its server arguments (a router in front of prefill/decode answers otherwise). */
function isSglangServerInfo(json: Record<string, unknown> | null): json is Record<string, unknown> {
  return json !== null && typeof json.version === 'string' && ('tp_size' in json || 'model_path' in json)
}

/** SGLang's prefill/decode router: the server infos of its `prefill` and `decode` servers, by role; null for any other answer. */
function routerServers(json: Record<string, unknown> | null): Array<[string, Record<string, unknown>]> | null {
  if (json === null || !Array.isArray(json.prefill) || !Array.isArray(json.decode)) return null
  const role = (name: string, list: unknown[]) =>
    list
      .filter((i): i is Record<string, unknown> => i !== null && typeof i === 'object')
      .map((i): [string, Record<string, unknown>] => [name, i])
  return [...role('prefill', json.prefill), ...role('decode', json.decode)]
}

/** The model card of `modelId` in a `/v1/models` answer, else its first card. */
function modelCard(models: Record<string, unknown> | null, modelId: string): Record<string, unknown> | null {
  const data = Array.isArray(models?.data) ? (models.data as unknown[]) : []
  const cards = data.filter((c): c is Record<string, unknown> => c !== null && typeof c === 'object')
  return cards.find((c) => c.id === modelId) ?? cards[0] ?? null
}

function kindFact(answers: EndpointAnswers, card: Record<string, unknown> | null): Reported['kind'] {
  const found = (value: ReportedKind, source: string): Reported['kind'] => ({ value, source, reason: null })
  if (isSglangServerInfo(answers.serverInfo)) return found('sglang', 'GET /get_server_info')
  if (routerServers(answers.serverInfo) !== null) return found('sglang', 'GET /get_server_info (a prefill/decode router)')
  const owner = typeof card?.owned_by === 'string' ? card.owned_by : null
  const owned = owner === null ? undefined : OWNERS[owner]
  if (owned !== undefined) return found(owned, `GET /v1/models (owned_by "${owner}")`)
  const names = answers.metrics?.split('\n').filter((l) => l !== '' && !l.startsWith('#')) ?? []
  for (const [prefix, kind] of METRIC_PREFIXES) {
    if (names.some((l) => l.startsWith(prefix))) return found(kind, `GET /metrics (${prefix} names)`)
  }
  const said = owner === null ? 'no owned_by' : `owned_by "${owner}"`
  return {
    value: null,
    source: null,
    reason: `no engine recognised: GET /get_server_info is not SGLang's, GET /v1/models has ${said}, GET /metrics has no vllm: or sglang: names`,
  }
}

/** A fact from SGLang's server arguments, else from the model card, else null with what was asked. */
function pick<T>(
  sources: ReadonlyArray<[string, unknown]>,
  read: (v: unknown) => T | null,
  missing: string,
): { value: T | null; source: string | null; reason: string | null } {
  for (const [source, raw] of sources) {
    const value = read(raw)
    if (value !== null) return { value, source, reason: null }
  }
  return { value: null, source: null, reason: missing }
}

/**
 * The facts an endpoint's answers hold. Pure. SGLang's server arguments come first, then the
 * `/v1/models` card of `modelId`; a fact neither holds is null with the reason.
 * @example
 * const serverInfo = { version: '0.5.5', tp_size: 2, model_path: 'Qwen/Qwen3-8B' }
 * reportedFacts({ serverInfo, models: null, metrics: null }, 'm').tensorParallel.value // 2
 */
export function reportedFacts(answers: EndpointAnswers, modelId: string): Reported {
  const card = modelCard(answers.models, modelId)
  const info = isSglangServerInfo(answers.serverInfo) ? answers.serverInfo : null
  const fromInfo = (key: string): Array<[string, unknown]> => (info === null ? [] : [[`GET /get_server_info (${key})`, info[key]]])
  const fromCard = (key: string): Array<[string, unknown]> => (card === null ? [] : [[`GET /v1/models (${key})`, card[key]]])
  const router = routerServers(answers.serverInfo)
  const noTensorParallel =
    router !== null
      ? `a prefill/decode router answers, its servers each with their own: ${router.map(([role, i]) => `${role} tp_size ${String(i.tp_size)} (version ${String(i.version)})`).join(', ')}`
      : info === null
        ? 'only SGLang reports its tensor-parallel size (GET /get_server_info tp_size); this endpoint does not'
        : 'GET /get_server_info has no tp_size'
  return {
    kind: kindFact(answers, card),
    tensorParallel: pick(fromInfo('tp_size'), positiveInt, noTensorParallel),
    modelPath: pick(
      [...fromInfo('model_path'), ...fromCard('root')],
      nonEmpty,
      'neither GET /get_server_info model_path nor /v1/models root',
    ),
    servedModelName: pick(
      [...fromInfo('served_model_name'), ...fromCard('id')],
      nonEmpty,
      'neither GET /get_server_info served_model_name nor a /v1/models card',
    ),
    maxContext: pick(
      [...fromInfo('context_length'), ...fromCard('max_model_len')],
      positiveInt,
      'neither GET /get_server_info context_length nor /v1/models max_model_len (SGLang reports null for the model’s own default)',
    ),
  }
}

async function answer(url: string, timeoutMs: number): Promise<string | null> {
  try {
    const reply = await httpRequest(url, { timeoutMs })
    return reply.statusCode === 200 ? reply.text : null
  } catch {
    return null
  }
}

function asObject(text: string | null): Record<string, unknown> | null {
  if (text === null) return null
  try {
    const json = JSON.parse(text) as unknown
    return json !== null && typeof json === 'object' && !Array.isArray(json) ? (json as Record<string, unknown>) : null
  } catch {
    return null
  }
}

/** Asks the endpoint at `origin` about itself (three GETs, each bounded by `timeoutMs`); never throws. */
export async function queryReportedFacts(origin: string, modelId: string, timeoutMs = 5000): Promise<Reported> {
  const [serverInfo, models, metrics] = await Promise.all([
    answer(`${origin}/get_server_info`, timeoutMs),
    answer(`${origin}/v1/models`, timeoutMs),
    answer(`${origin}/metrics`, timeoutMs),
  ])
  return reportedFacts({ serverInfo: asObject(serverInfo), models: asObject(models), metrics }, modelId)
}
