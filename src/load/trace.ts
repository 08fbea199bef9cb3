import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { resolve } from 'node:path'
import { ServegateError } from '../errors.ts'

/** One request of a trace: when it arrives, how large it is, and which blocks of prompt it shares. */
export interface TraceRow {
  /** 1-based line in the file. */
  line: number
  /** Arrival offset from the first row, ms (before any time scale). */
  offsetMs: number
  /** Prompt tokens, as the engine counts them. */
  promptTokens: number
  /** Output tokens: the request's `max_tokens`. */
  outputTokens: number
  /**
   * `hash_ids` (Mooncake, AIPerf's `mooncake_trace`): one id per block of the prompt, in order;
   * requests sharing an id share that block's bytes. Null when the row has none.
   */
  hashIds: number[] | null
  /** `session_id` (AIPerf's multi-turn traces): the conversation the row is a turn of; null when absent. */
  sessionId: string | null
  /** `delay` (AIPerf's multi-turn traces): ms to wait after the session's previous turn before this one; null when absent. */
  delayMs: number | null
  /**
   * A later turn of a session (a `delay` and an earlier row of its `session_id`): the 0-based row
   * of the session's previous turn, which must end (plus `delay`) before this one is sent; null for
   * a row sent at its own time.
   */
  after: number | null
  /** The row's turn in its session, 1-based; null for a row without `session_id`. */
  turn: number | null
}

export interface LoadedTrace {
  /** Absolute path. */
  path: string
  /** sha256 of the file bytes, hex. */
  sha256: string
  rows: TraceRow[]
}

/** Each field and the spellings it is read from: servegate's own, then public traces' (Mooncake, AIPerf). */
const FIELDS = {
  offsetMs: ['offsetMs', 'timestamp'],
  promptTokens: ['promptTokens', 'input_length'],
  outputTokens: ['outputTokens', 'output_length'],
} as const

const EXAMPLE = '{"timestamp": 0, "input_length": 512, "output_length": 64}'

function fail(path: string, line: number, message: string): never {
  throw new ServegateError('FILE_INVALID', `${path}:${line}: ${message}`)
}

/** The value of a field under whichever spelling the row uses; exactly one must be present. */
function field(object: Record<string, unknown>, name: keyof typeof FIELDS, path: string, line: number): unknown {
  const present = FIELDS[name].filter((key) => key in object)
  if (present.length === 0)
    fail(path, line, `missing field \`${FIELDS[name][1]}\` (or \`${FIELDS[name][0]}\`); write one object per line, e.g. ${EXAMPLE}`)
  if (present.length > 1) fail(path, line, `both \`${present[0]}\` and \`${present[1]}\` are set; keep one`)
  return object[present[0] as string]
}

function number(value: unknown, key: string, integer: boolean, min: number, path: string, line: number): number {
  const ok = typeof value === 'number' && Number.isFinite(value) && value >= min && (!integer || Number.isInteger(value))
  if (!ok) fail(path, line, `field \`${key}\` is ${JSON.stringify(value)}; set it to ${integer ? 'an integer' : 'a number'} ≥ ${min}`)
  return value as number
}

/** `hash_ids`: a list of integers (block ids), or null when the row has none. */
function hashIds(object: Record<string, unknown>, path: string, line: number): number[] | null {
  const value = object.hash_ids
  if (value === undefined || value === null) return null
  if (!Array.isArray(value)) fail(path, line, `field \`hash_ids\` is ${JSON.stringify(value)}; set it to a list of integers, e.g. [46, 47]`)
  const bad = value.findIndex((id) => !Number.isSafeInteger(id))
  if (bad >= 0) fail(path, line, `field \`hash_ids\` item ${bad} is ${JSON.stringify(value[bad])}; hash ids are integers, e.g. [46, 47]`)
  return value as number[]
}

/** `session_id`: a string, or null when the row has none. */
function sessionId(object: Record<string, unknown>, path: string, line: number): string | null {
  const value = object.session_id
  if (value === undefined || value === null) return null
  if (typeof value !== 'string' || value === '')
    fail(path, line, `field \`session_id\` is ${JSON.stringify(value)}; set it to a non-empty string`)
  return value
}

/**
 * Parses a JSONL trace: one request per line with its arrival time (ms) and its prompt and
 * output lengths, and where present its `hash_ids` (Mooncake's block ids), `session_id` and
 * `delay` (ms; AIPerf's multi-turn rows); blank lines skipped, other fields ignored. A row with a
 * `delay` whose session had an earlier row is that session's next turn: it is sent after the
 * previous turn ended plus the delay, and needs no `timestamp` (one it has is not used). Times of
 * the other rows must not decrease; offsets are taken from the first row. Pure.
 * @param path used only in error messages
 * @throws ServegateError `FILE_INVALID` naming `<path>:<line>`, the field and the fix
 */
export function parseTrace(text: string, path: string): TraceRow[] {
  const rows: TraceRow[] = []
  let first: number | null = null
  let previous = -Infinity
  // Each session's latest row and its turns so far.
  const sessions = new Map<string, { row: number; turns: number }>()
  const lines = text.split('\n')
  for (let i = 0; i < lines.length; i++) {
    const source = (lines[i] as string).trim()
    if (source === '') continue
    const line = i + 1
    let value: unknown
    try {
      value = JSON.parse(source)
    } catch (error) {
      fail(path, line, `not valid JSON (${(error as Error).message}); write one object per line, e.g. ${EXAMPLE}`)
    }
    if (value === null || typeof value !== 'object' || Array.isArray(value))
      fail(path, line, `not a JSON object; write one object per line, e.g. ${EXAMPLE}`)
    const object = value as Record<string, unknown>
    const session = sessionId(object, path, line)
    const delayMs = object.delay === undefined || object.delay === null ? null : number(object.delay, 'delay', false, 0, path, line)
    const earlier = session === null ? undefined : sessions.get(session)
    // A later turn goes when its session's previous one ended, plus its delay: it needs no time of its own.
    const after = earlier !== undefined && delayMs !== null ? earlier.row : null
    const timed = after === null || FIELDS.offsetMs.some((key) => key in object)
    const at = timed ? number(field(object, 'offsetMs', path, line), 'timestamp', false, 0, path, line) : previous
    if (after === null) {
      if (at < previous) fail(path, line, `time ${at} ms is before the previous row's ${previous} ms; sort the trace by arrival time`)
      previous = at
    }
    first ??= at
    if (session !== null) sessions.set(session, { row: rows.length, turns: (earlier?.turns ?? 0) + 1 })
    rows.push({
      line,
      offsetMs: at - first,
      after,
      turn: session === null ? null : (earlier?.turns ?? 0) + 1,
      promptTokens: number(field(object, 'promptTokens', path, line), 'input_length', true, 1, path, line),
      outputTokens: number(field(object, 'outputTokens', path, line), 'output_length', true, 1, path, line),
      hashIds: hashIds(object, path, line),
      sessionId: session,
      delayMs,
    })
  }
  if (rows.length === 0) throw new ServegateError('FILE_INVALID', `${path}: no requests; write one object per line, e.g. ${EXAMPLE}`)
  return rows
}

function unreadable(path: string, error: unknown): ServegateError {
  return new ServegateError(
    'FILE_INVALID',
    `trace ${path}: cannot read it (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}` +
      `${(error as NodeJS.ErrnoException).code === 'ENOENT' ? `: no such file ${resolve(path)}` : ''}); pass the path of a JSONL trace`,
    { cause: error },
  )
}

/**
 * Reads and parses a trace file, with its sha256 (recorded in the plan, so a pair can show both
 * arms replayed the same file).
 * @throws ServegateError `FILE_INVALID` when unreadable or malformed
 */
export async function loadTrace(path: string): Promise<LoadedTrace> {
  const absolute = resolve(path)
  let bytes: Buffer
  try {
    bytes = await readFile(absolute)
  } catch (error) {
    throw unreadable(path, error)
  }
  return { path: absolute, sha256: createHash('sha256').update(bytes).digest('hex'), rows: parseTrace(bytes.toString('utf8'), path) }
}

/**
 * {@link loadTrace} without waiting: what a declaration reads, the same checks and result.
 * @throws ServegateError `FILE_INVALID` when unreadable or malformed
 */
export function loadTraceSync(path: string): LoadedTrace {
  const absolute = resolve(path)
  let bytes: Buffer
  try {
    bytes = readFileSync(absolute)
  } catch (error) {
    throw unreadable(path, error)
  }
  return { path: absolute, sha256: createHash('sha256').update(bytes).digest('hex'), rows: parseTrace(bytes.toString('utf8'), path) }
}

/**
 * Checks that a trace of `rows` rows can serve a cell of `requests` measured requests.
 * @param path the trace as the cell names it, for the message
 * @throws ServegateError `CONFIG_INVALID` when it has fewer rows than `requests`
 */
export function checkReplayable(path: string, rows: number, requests: number): void {
  if (requests > rows) {
    throw new ServegateError(
      'CONFIG_INVALID',
      `requests: ${requests} but the trace ${path} has ${rows} rows; pass requests ≤ ${rows} (its first rows are replayed)`,
    )
  }
}

/**
 * The rows a cell of `requests` measured requests replays: the trace's first ones.
 * @throws ServegateError `CONFIG_INVALID` when the trace has fewer rows than `requests`
 */
export function replayedRows(trace: LoadedTrace, path: string, requests: number): TraceRow[] {
  checkReplayable(path, trace.rows.length, requests)
  return trace.rows.slice(0, requests)
}

/**
 * The share of a trace's prompt tokens that its own block ids say an earlier request already
 * sent: Σ over rows of `blockTokens ×` the length of the leading run of its `hash_ids` that
 * appeared in earlier rows (capped at its prompt tokens), over Σ prompt tokens. A prefix cache
 * that holds every block serves about this share (a row's first new block ends the run: a
 * prefix cache matches prefixes). Rows without `hash_ids` share nothing; null when no row has any.
 * @example traceReuseShare([{ promptTokens: 1024, hashIds: [1, 2] }, { promptTokens: 1024, hashIds: [1, 3] }], 512) // 0.25
 */
export function traceReuseShare(
  rows: ReadonlyArray<{ promptTokens: number; hashIds: readonly number[] | null }>,
  blockTokens: number,
): number | null {
  if (!rows.some((r) => r.hashIds !== null)) return null
  const seen = new Set<number>()
  let reused = 0
  let total = 0
  for (const { promptTokens, hashIds } of rows) {
    total += promptTokens
    if (hashIds === null) continue
    let run = 0
    while (run < hashIds.length && seen.has(hashIds[run] as number)) run++
    reused += Math.min(blockTokens * run, promptTokens)
    for (const id of hashIds) seen.add(id)
  }
  return total === 0 ? 0 : reused / total
}
