import { ServegateError } from './errors.ts'

const LOOPBACK_HOSTS = new Set(['localhost', '[::1]', '::1'])

/** True for 127.0.0.0/8, ::1 and localhost: the only hosts servegate sends load to. */
function isLoopbackHost(hostname: string): boolean {
  return LOOPBACK_HOSTS.has(hostname) || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname)
}

/** Parses a base URL (`http://127.0.0.1:8000` or `…/v1`) into its origin; loopback only. */
export function parseBaseUrl(raw: string): { origin: string; display: string } {
  let url: URL
  try {
    url = new URL(raw)
  } catch (error) {
    throw new ServegateError('CONFIG_INVALID', `baseUrl: "${raw}" is not a URL; pass e.g. http://127.0.0.1:8000`, { cause: error })
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ServegateError('CONFIG_INVALID', `baseUrl: protocol ${url.protocol} is not supported; use http:// or https://`)
  }
  if (!isLoopbackHost(url.hostname)) {
    throw new ServegateError(
      'CONFIG_INVALID',
      `baseUrl: ${url.hostname} is not a loopback address; servegate only targets engines on this host ` +
        "(127.0.0.1, ::1, localhost): run it on the engine's machine",
    )
  }
  const path = url.pathname.replace(/\/+$/, '')
  if (path !== '' && path !== '/v1') {
    throw new ServegateError('CONFIG_INVALID', `baseUrl: path ${url.pathname} is not supported; pass the server root or its /v1 prefix`)
  }
  return { origin: url.origin, display: url.origin }
}
