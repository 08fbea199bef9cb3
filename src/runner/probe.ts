import { type HttpReply, httpRequest } from '../http-request.ts'
import { ServegateError } from '../errors.ts'

/**
 * Checks, before any load is sent, that the endpoint answers and serves `model`
 * (`GET /v1/models`). A server without that route (404/405) is given the benefit of the doubt.
 * @throws ServegateError CONNECT_FAILED when nothing answers; CONFIG_INVALID for an unknown model
 */
export async function probeEndpoint(origin: string, model: string, signal?: AbortSignal, timeoutMs = 5000): Promise<void> {
  const timeout = AbortSignal.timeout(timeoutMs)
  let res: HttpReply
  try {
    res = await httpRequest(`${origin}/v1/models`, {
      signal: signal === undefined ? timeout : AbortSignal.any([signal, timeout]),
    })
  } catch (err) {
    const code = (err as { code?: string }).code
    const why =
      code === 'ECONNREFUSED'
        ? 'connection refused'
        : timeout.aborted
          ? `no answer within ${timeoutMs} ms`
          : code?.startsWith('HPE_') === true
            ? `its reply does not match the HTTP/1.1 protocol: ${(err as Error).message}`
            : (code ?? (err as Error).message)
    throw new ServegateError('CONNECT_FAILED', `cannot reach ${origin} (${why}); start the engine there or fix --base-url`, { cause: err })
  }
  const text = res.text
  if (res.statusCode !== 200) return
  let served: string[]
  try {
    const parsed = JSON.parse(text) as { data?: Array<{ id?: unknown }> }
    served = (parsed.data ?? []).flatMap((m) => (typeof m.id === 'string' ? [m.id] : []))
  } catch {
    return
  }
  if (served.length > 0 && !served.includes(model)) {
    throw new ServegateError('CONFIG_INVALID', `model "${model}" is not served at ${origin} (it serves: ${served.join(', ')}); fix --model`)
  }
}
