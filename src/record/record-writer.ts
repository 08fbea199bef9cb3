/**
 * The one way run records reach a file. The record's top level is indented JSON; its `requests`
 * hold one compact JSON line each, with the request's gaps packed (`itlPacked`, see
 * schema/itl-packed.ts):
 *
 * ```
 * {
 *   "schema": "servegate.run/v1",
 *   …
 *   "requests": [
 * {"status":"ok","index":0,…,"itlMs":null,…,"itlPacked":{"unit":"us","codec":"delta-zigzag-leb128","count":255,"base64":"…"}},
 * {"status":"ok","index":1,…}
 * ],
 *   "metrics": { … }
 * }
 * ```
 *
 * Files are written atomically (a temp file beside the target, then a rename) and streamed: the
 * requests come one at a time (from memory or a spill) and the text goes to the file in pieces of
 * about 1 MiB, so the whole file is never one string. Every string is scrubbed of the registered
 * secrets, request by request.
 */
import { mkdir, open, rename, rm } from 'node:fs/promises'
import { dirname } from 'node:path'
import { ServegateError } from '../errors.ts'
import type { CapacitySearch } from '../schema/capacity-record.ts'
import { packGaps } from '../schema/itl-packed.ts'
import type { RequestRecord, RunRecord } from '../schema/run.ts'
import { scrubDeep } from '../secrets.ts'

/** Text is handed to the file in pieces about this large. */
const WRITE_PIECE = 1024 * 1024

/** Stands in for an array written piece by piece while the rest of its object is stringified. */
const MARK = '\u0000servegate:streamed\u0000'

/** Turns text about to be written into what may be published (the evidence's `--redact`); identity by default. */
export type Redact = (text: string) => string

const asIs: Redact = (text) => text

/**
 * One request as the file stores it: one compact JSON line (no newline), gaps packed where each
 * is a whole number of microseconds (a record made before servegate quantized its gaps keeps
 * them in `itlMs`, so no figure changes), scrubbed of secrets and then passed through `redact`.
 * The packed bytes hold numbers only; they are neither scrubbed nor redacted, which could cut a
 * short secret's or host name's few characters out of their base64 by chance.
 */
export function requestLine(request: RequestRecord, redact: Redact = asIs): string {
  const packed = request.itlMs === null ? (request.itlPacked ?? null) : packGaps(request.itlMs)
  const { itlPacked: _packed, ...rest } = request
  const text = redact(JSON.stringify(scrubDeep(packed === null ? rest : { ...rest, itlMs: null })))
  return `${text.slice(0, -1)},"itlPacked":${JSON.stringify(packed)}}`
}

/**
 * An object's indented JSON, split where its array `key` goes: the text before the array and
 * after it, each scrubbed and passed through `redact`, every line after the first indented by
 * `indent` (an object nested in another).
 */
function around(value: object, key: string, redact: Redact, indent: string): { before: string; after: string } {
  const text = JSON.stringify(scrubDeep({ ...value, [key]: MARK }), null, 2)
  const mark = JSON.stringify(MARK)
  const at = text.indexOf(mark)
  if (at < 0) throw new ServegateError('INTERNAL', `record writer: the ${key} mark is missing from the scrubbed record`)
  const indented = (t: string) => redact(indent === '' ? t : t.replace(/\n/g, `\n${indent}`))
  return { before: indented(text.slice(0, at)), after: indented(text.slice(at + mark.length)) }
}

/** The array of request lines: `[`, one line each, `]`; `[]` when empty. */
async function* requestArray(lines: Iterable<string> | AsyncIterable<string>): AsyncGenerator<string> {
  let first = true
  for await (const line of lines) {
    yield `${first ? '[\n' : ',\n'}${line}`
    first = false
  }
  yield first ? '[]' : '\n]'
}

async function* recordPieces(
  record: RunRecord,
  lines: Iterable<string> | AsyncIterable<string>,
  redact: Redact,
  indent: string,
): AsyncGenerator<string> {
  const { before, after } = around(record, 'requests', redact, indent)
  yield before
  yield* requestArray(lines)
  yield after
}

function* linesOf(requests: Iterable<RequestRecord>, redact: Redact): Generator<string> {
  for (const r of requests) yield requestLine(r, redact)
}

async function* asyncLinesOf(requests: AsyncIterable<RequestRecord>): AsyncGenerator<string> {
  for await (const r of requests) yield requestLine(r)
}

/**
 * A run record's file text in one string, for the evidence (which hashes and keeps each file
 * whole): the layout `writeRunRecord` writes, each part passed through `redact` (the packed gaps
 * excepted).
 */
export function runRecordText(record: RunRecord, redact: Redact = asIs): string {
  const { before, after } = around(record, 'requests', redact, '')
  const lines = [...linesOf(record.requests, redact)]
  return `${before}${lines.length === 0 ? '[]' : `[\n${lines.join(',\n')}\n]`}${after}\n`
}

/** Writes text pieces to `path` atomically, in pieces of about `WRITE_PIECE`; the temp file is removed on failure. */
async function writePieces(path: string, pieces: AsyncIterable<string>): Promise<void> {
  await mkdir(dirname(path), { recursive: true })
  const tmp = `${path}.${process.pid}.${Date.now()}.tmp`
  const file = await open(tmp, 'w')
  try {
    let buffered = ''
    for await (const piece of pieces) {
      buffered += piece
      if (buffered.length >= WRITE_PIECE) {
        await file.write(buffered)
        buffered = ''
      }
    }
    await file.write(`${buffered}\n`)
  } catch (err) {
    await file.close()
    await rm(tmp, { force: true })
    throw err
  }
  await file.close()
  await rename(tmp, path)
}

/**
 * Writes a run record, streaming: `requests` (default the record's own) are taken one at a time,
 * so a spill or a generator can feed a record of any size.
 * @example await writeRunRecord('run.json', record)
 * @example await writeRunRecord('run.json', record, spill.inOrder())
 */
export async function writeRunRecord(
  path: string,
  record: RunRecord,
  requests: Iterable<RequestRecord> | AsyncIterable<RequestRecord> = record.requests,
): Promise<void> {
  const lines = Symbol.asyncIterator in requests ? asyncLinesOf(requests) : linesOf(requests, asIs)
  await writePieces(path, recordPieces(record, lines, asIs, ''))
}

/**
 * Writes a run record whose request lines are already made ({@link requestLine}, e.g. a spill's
 * lines in plan order), copying them as they are.
 */
export async function writeRunRecordLines(path: string, record: RunRecord, lines: AsyncIterable<string>): Promise<void> {
  await writePieces(path, recordPieces(record, lines, asIs, ''))
}

/** Writes a capacity search (`servegate.capacity/v1`): each probe's run record in `records` is laid out as a run record file is. */
export async function writeCapacityRecord(path: string, search: CapacitySearch): Promise<void> {
  async function* pieces(): AsyncGenerator<string> {
    const { before, after } = around(search, 'records', asIs, '')
    yield before
    if (search.records.length === 0) yield '[]'
    for (const [i, record] of search.records.entries()) {
      yield i === 0 ? '[\n    ' : ',\n    '
      yield* recordPieces(record, linesOf(record.requests, asIs), asIs, '    ')
    }
    if (search.records.length > 0) yield '\n  ]'
    yield after
  }
  await writePieces(path, pieces())
}
