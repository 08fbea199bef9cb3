/**
 * The secret values servegate was given (the API key, engine environment values marked secret),
 * held for this process so every writer can scrub them: run records, evidence, CLI output, engine
 * logs and the tails quoted in messages. The values themselves are never printed.
 *
 * Each value is scrubbed in its raw, JSON-escaped, URL-encoded and base64 forms (standard and
 * URL-safe alphabets, at each of the three byte alignments a value can take inside a longer
 * encoded string), and replaced by `[redacted]`.
 */

/**
 * The shortest secret servegate accepts, characters. A shorter one would scrub common words and
 * numbers out of every message, so registering it is refused (the caller says which option).
 * Encoded forms shorter than this are not scrubbed either.
 */
export const MIN_SECRET_CHARS = 4

/**
 * The shortest value of an environment variable taken as secret by its name alone (not listed
 * explicitly): shorter values of `*_TOKEN`-like names are more often flags (`1`, `false`).
 */
const MIN_IMPLICIT_SECRET_CHARS = 8

/**
 * Environment variable names whose values are secret by default: a `KEY`, `TOKEN`, `SECRET`,
 * `PASSWORD`/`PASSWD` or `CREDENTIAL(S)` word, delimited by `_` or the ends of the name.
 * @example SECRET_ENV_NAME.test('HF_TOKEN') // true
 * @example SECRET_ENV_NAME.test('TOKENIZERS_PARALLELISM') // false
 */
const SECRET_ENV_NAME = /(?:^|_)(?:API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)(?:_|$)/i

/** What replaces a secret in every form. */
const REDACTED = '[redacted]'

/** Every registered value, with the strings scrubbed for it. */
const registry = new Map<string, string[]>()
/** All needles, longest first, so a longer form is replaced before any form inside it. */
let needles: string[] = []

function base64Forms(bytes: Buffer): string[] {
  const forms = [bytes.toString('base64'), bytes.toString('base64url')]
  // Inside a longer encoded string the value starts at one of three byte alignments; the groups of
  // three bytes wholly inside it encode the same way whatever surrounds them.
  for (let start = 0; start < 3; start++) {
    const whole = Math.floor((bytes.length - start) / 3) * 3
    if (whole <= 0) continue
    const core = bytes.subarray(start, start + whole)
    forms.push(core.toString('base64'), core.toString('base64url'))
  }
  return forms
}

function formsOf(value: string): string[] {
  const uri = encodeURIComponent(value)
  const forms = [
    value,
    JSON.stringify(value).slice(1, -1),
    uri,
    uri.replace(/%[0-9A-F]{2}/g, (h) => h.toLowerCase()),
    uri.replace(/%20/g, '+'),
    ...base64Forms(Buffer.from(value, 'utf8')),
  ]
  return [...new Set(forms)].filter((f) => f.length >= MIN_SECRET_CHARS)
}

/**
 * Registers a secret value for this process. Returns `'too-short'` (and registers nothing) for a
 * value under {@link MIN_SECRET_CHARS}: the caller refuses it with a message naming its option.
 * @example if (registerSecret(apiKey) === 'too-short') throw new ServegateError('CONFIG_INVALID', '…')
 */
export function registerSecret(value: string): 'registered' | 'too-short' {
  if (value.length < MIN_SECRET_CHARS) return 'too-short'
  if (!registry.has(value)) {
    registry.set(value, formsOf(value))
    needles = [...new Set([...registry.values()].flat())].sort((a, b) => b.length - a.length)
  }
  return 'registered'
}

/**
 * Registers the secret values of an environment: every variable listed in `explicit`, and every
 * variable whose name matches {@link SECRET_ENV_NAME} with a value of at least
 * {@link MIN_IMPLICIT_SECRET_CHARS}. Returns the listed names whose values are too short to scrub.
 */
export function registerEnvSecrets(env: Readonly<Record<string, string>>, explicit: readonly string[] = []): string[] {
  const tooShort: string[] = []
  for (const [name, value] of Object.entries(env)) {
    if (explicit.includes(name)) {
      if (registerSecret(value) === 'too-short') tooShort.push(name)
    } else if (SECRET_ENV_NAME.test(name) && value.length >= MIN_IMPLICIT_SECRET_CHARS) {
      registerSecret(value)
    }
  }
  return tooShort
}

/** How many secret values are registered (never the values). */
export function registeredSecretCount(): number {
  return registry.size
}

/** Forgets every registered secret; for tests. */
export function clearSecrets(): void {
  registry.clear()
  needles = []
}

/**
 * Replaces every registered secret, in each of its forms, with `[redacted]`.
 * @example registerSecret('hunter22'); scrubSecrets('invalid api key hunter22') // 'invalid api key [redacted]'
 */
export function scrubSecrets(text: string): string {
  let out = text
  for (const needle of needles) if (out.includes(needle)) out = out.split(needle).join(REDACTED)
  return out
}

/**
 * {@link scrubSecrets}, and a text that ends in the first {@link MIN_SECRET_CHARS} or more
 * characters of a secret loses that end too: a quote cut short (`data.slice(0, 80)`) must not keep
 * half a key. For bounded messages only; a text that arrives in pieces uses {@link SecretStreamScrubber}.
 */
export function scrubSecretsAndCutEnd(text: string): string {
  const out = scrubSecrets(text)
  for (const needle of needles) {
    for (let k = needle.length - 1; k >= MIN_SECRET_CHARS; k--) {
      if (out.endsWith(needle.slice(0, k))) return `${out.slice(0, out.length - k)}${REDACTED}`
    }
  }
  return out
}

/**
 * A JSON-safe value with every string (and object key) scrubbed; numbers, booleans and null are
 * left alone, so the result still parses as the same schema. Unchanged when nothing is registered.
 */
export function scrubDeep<T>(value: T): T {
  if (needles.length === 0) return value
  return walk(value) as T
}

function walk(value: unknown): unknown {
  if (typeof value === 'string') return scrubSecrets(value)
  if (Array.isArray(value)) return value.map(walk)
  if (value !== null && typeof value === 'object' && !(value instanceof Date)) {
    const out: Record<string, unknown> = {}
    for (const [k, v] of Object.entries(value)) out[scrubSecrets(k)] = walk(v)
    return out
  }
  return value
}

/**
 * Scrubs a text that arrives in pieces (an engine's output): a secret split across two pieces is
 * still caught, because the last characters that could begin one are held back until the next
 * piece or `end()`.
 * @example const s = new SecretStreamScrubber(); log.write(s.write(chunk)); …; log.write(s.end())
 */
export class SecretStreamScrubber {
  private held = ''

  /** Takes the next piece; returns what can be written now. */
  write(piece: string): string {
    const text = scrubSecrets(this.held + piece)
    const hold = Math.min(text.length, Math.max(0, (needles[0]?.length ?? 0) - 1))
    this.held = text.slice(text.length - hold)
    return text.slice(0, text.length - hold)
  }

  /** Returns what was held back; the scrubber is empty afterwards. */
  end(): string {
    const rest = scrubSecrets(this.held)
    this.held = ''
    return rest
  }
}
