import { type HttpReply, httpRequest } from '../http-request.ts'
import { ServegateError } from '../errors.ts'

/** Node's codes for a certificate no trusted CA vouches for (node's tls, OpenSSL's X509_V_ERR_* names). */
const TLS_TRUST_CODES = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_UNTRUSTED',
])

/**
 * Checks, before any load is sent, that the endpoint answers and serves `model`
 * (`GET /v1/models`). A server without that route (404/405) is given the benefit of the doubt.
 * A redirect is refused, never followed: load goes only to the origin that was named.
 * @throws ServegateError CONNECT_FAILED when nothing answers; CONFIG_INVALID for an unknown model or a redirect
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
    if (code !== undefined && TLS_TRUST_CODES.has(code)) {
      throw new ServegateError(
        'CONNECT_FAILED',
        `cannot verify ${origin}'s TLS certificate (${code}: ${(err as Error).message}); if it is signed by your own CA ` +
          '(self-signed), pass that CA in PEM with --ca-file FILE (caFile); nothing else was sent',
        { cause: err },
      )
    }
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
  if (res.statusCode >= 300 && res.statusCode < 400) throw redirectRefused(origin, res)
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

/** A 3xx from the probe: where it pointed (the Location's host), and that servegate never goes there. */
function redirectRefused(origin: string, res: HttpReply): ServegateError {
  const location = Array.isArray(res.headers.location) ? res.headers.location[0] : res.headers.location
  let host = 'no Location header'
  if (location !== undefined) {
    try {
      host = new URL(location, origin).host
    } catch {
      host = 'an unparsable Location'
    }
  }
  return new ServegateError(
    'CONFIG_INVALID',
    `${origin} redirected GET /v1/models (${res.statusCode}) to ${host}; servegate never follows redirects, ` +
      'so nothing was sent there: pass the endpoint itself as --base-url (or baseUrl), with --remote if it is on another host',
  )
}
