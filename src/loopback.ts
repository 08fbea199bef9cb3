import { readFileSync } from 'node:fs'
import { ServegateError } from './errors.ts'
import { trustCa } from './http-request.ts'

const LOOPBACK_HOSTS = new Set(['localhost', '[::1]', '::1'])

/** True for 127.0.0.0/8, ::1 and localhost: the hosts servegate sends load to unless told otherwise. */
export function isLoopbackHost(hostname: string): boolean {
  return LOOPBACK_HOSTS.has(hostname) || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname)
}

/** A parsed base URL: where requests go, and whether that is off this host. */
export interface ParsedBaseUrl {
  /** `http://host:port` or `https://host:port`. */
  origin: string
  display: string
  /** The host and port (`10.0.0.2:8000`), as the manifest records a remote target. */
  host: string
  /** True when the host is not loopback (allowed only with `remote`). */
  remote: boolean
}

/**
 * Parses a base URL (`http://127.0.0.1:8000` or `…/v1`) into its origin. A host other than
 * loopback is refused unless `remote` says it is meant (`--remote`, `remote: true`): a
 * remote target is only ever named on purpose, never reached by accident.
 * @throws ServegateError CONFIG_INVALID for a bad URL or a remote host without `remote`
 */
export function parseBaseUrl(raw: string, remote = false): ParsedBaseUrl {
  let url: URL
  try {
    url = new URL(raw)
  } catch (error) {
    throw new ServegateError('CONFIG_INVALID', `baseUrl: "${raw}" is not a URL; pass e.g. http://127.0.0.1:8000`, { cause: error })
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ServegateError('CONFIG_INVALID', `baseUrl: protocol ${url.protocol} is not supported; use http:// or https://`)
  }
  const offHost = !isLoopbackHost(url.hostname)
  if (offHost && !remote) {
    throw new ServegateError(
      'CONFIG_INVALID',
      `baseUrl: ${url.hostname} is not a loopback address (127.0.0.1, ::1, localhost); nothing was sent to it. ` +
        'To measure an endpoint on another host, say so on purpose: pass --remote (servegate run --base-url), ' +
        'or set remote: true (an external engine config, or runCell options)',
    )
  }
  const path = url.pathname.replace(/\/+$/, '')
  if (path !== '' && path !== '/v1') {
    throw new ServegateError('CONFIG_INVALID', `baseUrl: path ${url.pathname} is not supported; pass the server root or its /v1 prefix`)
  }
  return { origin: url.origin, display: url.origin, host: url.host, remote: offHost }
}

/**
 * Reads `caFile` (PEM) and verifies `origin`'s TLS certificate against it from now on
 * (`trustCa`); nothing without a file. Only an `https://` origin takes one.
 * @param field the option or flag named in errors (`caFile`, `engine.caFile`)
 * @throws ServegateError CONFIG_INVALID for an `http://` origin, an unreadable file or one without a PEM certificate
 */
export function trustCaFile(origin: string, caFile: string | undefined, field: string): void {
  if (caFile === undefined) return
  if (!origin.startsWith('https:')) {
    throw new ServegateError(
      'CONFIG_INVALID',
      `${field}: a CA file verifies an https:// endpoint; ${origin} is plain HTTP: drop it or use https://`,
    )
  }
  let pem: string
  try {
    pem = readFileSync(caFile, 'utf8')
  } catch (error) {
    throw new ServegateError(
      'CONFIG_INVALID',
      `${field}: cannot read ${caFile} (${(error as NodeJS.ErrnoException).code ?? 'error'}); pass a readable PEM file`,
      {
        cause: error,
      },
    )
  }
  if (!pem.includes('-----BEGIN CERTIFICATE-----')) {
    throw new ServegateError(
      'CONFIG_INVALID',
      `${field}: ${caFile} holds no PEM certificate (-----BEGIN CERTIFICATE-----); pass the CA's certificate in PEM`,
    )
  }
  trustCa(origin, pem)
}
