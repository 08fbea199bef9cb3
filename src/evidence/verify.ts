/**
 * Reading and verifying an evidence directory: every sha256 recomputed, every run record
 * parsed, every summary recomputed from the records, every verdict decided again, and with a
 * public key the signature of SHA256SUMS checked. Each problem names its file.
 */
import { createPublicKey, type KeyObject, verify } from 'node:crypto'
import { readdir, readFile, stat } from 'node:fs/promises'
import { join, relative, sep } from 'node:path'
import { z } from 'zod'
import { ServegateError } from '../errors.ts'
import { computeCellMetrics } from '../metrics/cell-metrics.ts'
import { parseRunRecord } from '../record/record-io.ts'
import { EvidenceIndex, type FileRef } from '../schema/evidence.ts'
import type { RunRecord } from '../schema/run.ts'
import { type BuiltEvidence, type EvidenceFile, sha256, statisticsOf } from './build.ts'
import { armSummary } from './arm-summary.ts'
import { type EvidenceRecord, firstDifference, rederiveVerdicts, STORED_BASELINE_CELL } from './rederive.ts'
import { parseStrictJson } from './strict-json.ts'
import {
  INDEX_FILE,
  indexedPaths,
  MAX_EVIDENCE_FILE_BYTES,
  SAFE_PATH,
  SIGNATURE_FILE,
  SIGNING_KEY_ENV,
  SUMS_FILE,
  UNINDEXED_FILES,
} from './write.ts'

/**
 * Reads and validates `index.json` of an evidence directory: at most `MAX_EVIDENCE_FILE_BYTES`,
 * strict JSON (no key named twice in an object), then its schema.
 */
export async function readIndex(dir: string): Promise<EvidenceIndex> {
  const path = join(dir, INDEX_FILE)
  const cannotRead = (error: NodeJS.ErrnoException) => {
    throw new ServegateError('FILE_INVALID', `${path}: cannot read (${error.code ?? error.message}); is ${dir} an evidence directory?`, {
      cause: error,
    })
  }
  const { size } = await stat(path).catch(cannotRead)
  if (size > MAX_EVIDENCE_FILE_BYTES) throw new ServegateError('FILE_INVALID', oversized(path, size, MAX_EVIDENCE_FILE_BYTES))
  const value = parseStrictJson(await readFile(path).catch(cannotRead), path)
  const parsed = EvidenceIndex.safeParse(value)
  if (!parsed.success)
    throw new ServegateError(
      'FILE_INVALID',
      `${path}: not a valid servegate.evidence/v1 index: ${z.prettifyError(parsed.error).split('\n').slice(0, 4).join('; ')}`,
    )
  return parsed.data
}

/** A path as printed in a problem: every character outside printable ASCII as `\u{…}`, so a look-alike or a control character shows. */
function shown(path: string): string {
  return path.replace(/[^\x20-\x7e]/gu, (c) => `\\u{${(c.codePointAt(0) as number).toString(16)}}`)
}

/** The problem of a file past the size bound. */
function oversized(path: string, bytes: number, bound: number): string {
  return `${shown(path)}: ${bytes} bytes, over the ${bound}-byte bound of a file of evidence; servegate writes none so large, and verify does not read it`
}

/** Why a path names no file servegate writes (a character outside `SAFE_PATH`, absolute, `..`, an empty segment), or null. */
function nameProblem(path: string): string | null {
  const outside = [...new Set(path)].filter((c) => !SAFE_PATH.test(c))
  if (outside.length > 0) {
    const named = outside.map((c) => {
      const code = `U+${(c.codePointAt(0) as number).toString(16).toUpperCase().padStart(4, '0')}`
      return /^[\p{L}\p{N}\p{P}\p{S}]$/u.test(c) ? `"${c}" (${code})` : code
    })
    return `its name holds ${named.join(', ')}, outside the safe set of evidence names (ASCII letters, digits, ".", "_", "-", "/")`
  }
  const unsafe = unsafePath(path)
  return unsafe === null ? null : `its name has ${unsafe}`
}

/** Every file under a directory, relative and `/`-separated, sorted. */
export async function listFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true })
  return entries
    .filter((e) => e.isFile())
    .map((e) => relative(dir, join(e.parentPath, e.name)).split(sep).join('/'))
    .sort()
}

/** Why a listed path cannot name a file of the directory (absolute, `..`, `\\`, empty segments), or null. */
function unsafePath(path: string): string | null {
  if (path.startsWith('/') || /^[A-Za-z]:/.test(path)) return 'an absolute path'
  if (path.includes('\\')) return 'a backslash'
  const segments = path.split('/')
  if (segments.includes('..')) return 'a `..` segment that leaves the directory'
  if (segments.some((s) => s === '' || s === '.')) return 'an empty or `.` segment'
  return null
}

/** The SHA256SUMS lines as path → hash; malformed lines, unsafe paths and paths listed twice are problems. */
function parseSums(text: string, problems: string[]): Map<string, string> {
  const sums = new Map<string, string>()
  for (const line of text.split('\n')) {
    if (line === '') continue
    const match = /^([0-9a-f]{64}) {2}(.+)$/.exec(line)
    if (match === null) {
      problems.push(`${SUMS_FILE}: malformed line "${line.slice(0, 80)}"`)
      continue
    }
    const [, hash, path] = match as unknown as [string, string, string]
    const unsafe = unsafePath(path)
    if (unsafe !== null) problems.push(`${SUMS_FILE}: "${path.slice(0, 80)}" has ${unsafe}; list the directory's own files only`)
    else if (sums.has(path)) problems.push(`${SUMS_FILE}: ${path} is listed twice`)
    else sums.set(path, hash)
  }
  return sums
}

/** Entries that are not plain files or directories (symbolic links, sockets…): evidence holds plain files only. */
async function oddEntries(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true })
  return entries
    .filter((e) => !e.isFile() && !e.isDirectory())
    .map((e) => relative(dir, join(e.parentPath, e.name)).split(sep).join('/'))
    .sort()
}

/**
 * The plain files of an evidence directory and their sizes, and the bound past which none is
 * read; empty when the directory cannot be read.
 */
interface Scan {
  sizes: Map<string, number>
  maxFileBytes: number
}

async function scan(dir: string, maxFileBytes: number): Promise<Scan> {
  const paths = await listFiles(dir).catch(() => [] as string[])
  const sizes = new Map<string, number>()
  for (const path of paths) {
    const size = await stat(join(dir, path)).then(
      (s) => s.size,
      () => null,
    )
    if (size !== null) sizes.set(path, size)
  }
  return { sizes, maxFileBytes }
}

/** Whether the scan found the file past its bound. */
function overBound(files: Scan, path: string): boolean {
  return (files.sizes.get(path) ?? 0) > files.maxFileBytes
}

/** A file's bytes, read only when it is a plain file of the scan within the bound; null otherwise. */
async function readBytes(dir: string, path: string, files: Scan): Promise<Buffer | null> {
  if (!files.sizes.has(path) || overBound(files, path)) return null
  return readFile(join(dir, path)).catch(() => null)
}

/** A file against its reference: a name servegate writes, present, within the bound, the same size, the same sha256. */
async function checkRef(dir: string, ref: FileRef, where: string, problems: string[], files: Scan): Promise<Buffer | null> {
  const name = nameProblem(ref.path)
  if (name !== null) {
    problems.push(`${where}: references ${shown(ref.path)}, but ${name}; it is not read`)
    return null
  }
  if (overBound(files, ref.path)) {
    problems.push(oversized(ref.path, files.sizes.get(ref.path) as number, files.maxFileBytes))
    return null
  }
  const bytes = await readBytes(dir, ref.path, files)
  if (bytes === null) problems.push(`${ref.path}: missing (listed in ${where})`)
  else if (bytes.length !== ref.bytes || sha256(bytes) !== ref.sha256)
    problems.push(
      `${ref.path}: sha256 ${sha256(bytes).slice(0, 16)}… (${bytes.length} bytes) ≠ ` +
        `${ref.sha256.slice(0, 16)}… (${ref.bytes} bytes) in ${where}`,
    )
  return bytes
}

/** A run record from its file's bytes: strict JSON (no key twice), then the record's schema. */
function readRecord(bytes: Buffer, path: string): RunRecord {
  return parseRunRecord(parseStrictJson(bytes, path), path)
}

/** A run record's stored metrics against those recomputed from its requests. */
function checkRecordMetrics(record: RunRecord, path: string, problems: string[]): void {
  if (record.importedFrom?.perRequest === false) return
  // The dispatcher's own counts (in flight, capped) are not in the requests: they are kept as recorded.
  const recomputed = {
    ...computeCellMetrics(record.requests, record.metrics.wallClockMs, record.metrics.goodput?.slo ?? null),
    openLoop: record.metrics.openLoop,
  }
  const stored = Object.fromEntries(Object.keys(recomputed).map((k) => [k, (record.metrics as Record<string, unknown>)[k]]))
  const differs = firstDifference(recomputed, stored)
  if (differs !== null) problems.push(`${path}: metrics.${differs} differs from what its requests give`)
}

/** How `verifyEvidence` checks a directory. */
export interface VerifyOptions {
  /** An ed25519 public key: `SHA256SUMS.sig` must then be its signature of `SHA256SUMS` (a missing one is a problem). */
  publicKey?: KeyObject
  /**
   * The largest file, in bytes, the directory may hold; a larger one is a problem and is not read.
   * @default MAX_EVIDENCE_FILE_BYTES (1 GiB)
   */
  maxFileBytes?: number
}

/** What `verifyEvidence` found: every problem (none: verified), what it read, and the signature's state. */
export interface Verification {
  problems: string[]
  files: number
  records: number
  /** `verified` (checked against the public key), `unchecked` (present, no key given), `absent`. */
  signature: 'verified' | 'unchecked' | 'absent'
}

/** The signature of SHA256SUMS against the public key, as a problem; null when it holds. */
function signatureProblem(sums: Buffer, signature: string | null, publicKey: KeyObject): string | null {
  if (signature === null)
    return `${SIGNATURE_FILE}: missing, but a public key was given: this evidence is not signed (the reporter signs it when ${SIGNING_KEY_ENV} holds the ed25519 private key)`
  const bytes = Buffer.from(signature.trim(), 'base64')
  let valid: boolean
  try {
    valid = bytes.length === 64 && verify(null, sums, publicKey, bytes)
  } catch {
    valid = false
  }
  return valid
    ? null
    : `${SIGNATURE_FILE}: not a signature of ${SUMS_FILE} by this public key: the evidence changed after it was signed, or another key signed it`
}

/** A problem from reading the file at `path`: its message, which names the file, or the message after the path. */
function readProblem(path: string, error: unknown): string {
  const message = (error as Error).message
  return message.startsWith(`${path}: `) ? message : `${path}: ${message}`
}

/**
 * Verifies an evidence directory; returns every problem found (empty: verified). The directory is
 * a closed world: every file is referenced by index.json or is one of `UNINDEXED_FILES`, has a
 * name of `SAFE_PATH`, and is at most `maxFileBytes`; every JSON file read names each key of an
 * object once. Checks SHA256SUMS against every file (and that no file is unlisted), index.json
 * against its schema and its references, each run record's metrics against its requests, each
 * arm summary and the statistics against the records, and decides every verdict again from the
 * records: each gate (its gate function on the records it judged, with its options), each pair
 * check, each cell's disposition and the promotion. With `publicKey`, `SHA256SUMS.sig` must be
 * its signature.
 */
export async function verifyEvidence(dir: string, options: VerifyOptions = {}): Promise<Verification> {
  const problems: string[] = []
  const files = await scan(dir, options.maxFileBytes ?? MAX_EVIDENCE_FILE_BYTES)
  const present = [...files.sizes.keys()]
  for (const path of present) {
    if (overBound(files, path)) problems.push(oversized(path, files.sizes.get(path) as number, files.maxFileBytes))
    const name = nameProblem(path)
    if (name !== null) problems.push(`${shown(path)}: ${name}; servegate writes no such name`)
  }
  const signatureState = !files.sizes.has(SIGNATURE_FILE) ? 'absent' : options.publicKey === undefined ? 'unchecked' : 'verified'
  const result = (records: number): Verification => ({
    problems: [...new Set(problems)],
    files: present.length,
    records,
    signature: signatureState,
  })
  if (!files.sizes.has(SUMS_FILE)) return { problems: [`${SUMS_FILE}: missing`], files: 0, records: 0, signature: signatureState }
  const sumsBytes = await readBytes(dir, SUMS_FILE, files)
  if (sumsBytes === null) return result(0)
  if (options.publicKey !== undefined && !overBound(files, SIGNATURE_FILE)) {
    const signature = (await readBytes(dir, SIGNATURE_FILE, files))?.toString('utf8') ?? null
    const problem = signatureProblem(sumsBytes, signature, options.publicKey)
    if (problem !== null) problems.push(problem)
  }
  const sums = parseSums(sumsBytes.toString('utf8'), problems)
  for (const [path, hash] of sums) {
    if (overBound(files, path)) continue
    const bytes = await readBytes(dir, path, files)
    if (bytes === null) problems.push(`${shown(path)}: missing (listed in ${SUMS_FILE})`)
    else if (sha256(bytes) !== hash) problems.push(`${path}: sha256 ${sha256(bytes).slice(0, 16)}… ≠ ${hash.slice(0, 16)}… in ${SUMS_FILE}`)
  }
  for (const path of present)
    if (path !== SUMS_FILE && path !== SIGNATURE_FILE && !sums.has(path)) problems.push(`${shown(path)}: not listed in ${SUMS_FILE}`)
  for (const path of await oddEntries(dir)) {
    problems.push(`${shown(path)}: not a plain file (a symbolic link?); evidence holds plain files only, so replace it with the file`)
  }

  if (overBound(files, INDEX_FILE)) return result(0)
  let index: EvidenceIndex
  try {
    index = await readIndex(dir)
  } catch (error) {
    problems.push((error as Error).message)
    return result(0)
  }
  const known = new Set([...indexedPaths(index), ...UNINDEXED_FILES])
  for (const path of present)
    if (!known.has(path))
      problems.push(
        `${shown(path)}: not referenced by ${INDEX_FILE} and not one of ${UNINDEXED_FILES.join(', ')}: ` +
          'servegate wrote no such file, so it is not part of this evidence; remove it',
      )
  for (const ref of index.artifacts) await checkRef(dir, ref, 'index.json artifacts', problems, files)
  const read: EvidenceRecord[] = []
  for (const cell of index.cells) {
    for (const arm of cell.arms) {
      const bytes = await checkRef(dir, arm.record, `index.json cell ${cell.id}`, problems, files)
      if (bytes === null) continue
      let record: RunRecord
      try {
        record = readRecord(bytes, arm.record.path)
      } catch (error) {
        problems.push(readProblem(arm.record.path, error))
        continue
      }
      read.push({ cell: cell.id, arm: arm.arm, launch: arm.launch, record })
      checkRecordMetrics(record, arm.record.path, problems)
      const differs = firstDifference(armSummary(record, arm.arm, arm.launch, arm.record), arm)
      if (differs !== null)
        problems.push(
          `index.json: cell ${cell.id} ${arm.arm} launch ${arm.launch}: ${differs} differs from its run record ${arm.record.path}`,
        )
    }
  }
  for (const stored of index.storedBaselines) {
    const bytes = await checkRef(dir, stored.record, `index.json stored baseline ${stored.runId}`, problems, files)
    if (bytes === null) continue
    try {
      const record = readRecord(bytes, stored.record.path)
      if (record.runId !== stored.runId) problems.push(`${stored.record.path}: runId ${record.runId} ≠ ${stored.runId} in index.json`)
      read.push({ cell: STORED_BASELINE_CELL, arm: 'baseline', launch: 1, record })
      checkRecordMetrics(record, stored.record.path, problems)
    } catch (error) {
      problems.push(readProblem(stored.record.path, error))
    }
  }
  const differs = firstDifference(statisticsOf(index.cells, index.gates), index.statistics)
  if (differs !== null) problems.push(`index.json: statistics.${differs} differs from what the cells and gates give`)
  const pending = index.cells.filter((c) => c.disposition === 'pending').map((c) => c.id)
  if (index.partial !== null && firstDifference(pending, index.partial.cellsNotRun) !== null)
    problems.push(
      `index.json: partial.cellsNotRun is ${JSON.stringify(index.partial.cellsNotRun)}, but the pending cells are ${JSON.stringify(pending)}`,
    )
  problems.push(...rederiveVerdicts(index, read))
  return result(read.length)
}

/** The index and run records of an evidence directory, to render again; refuses records whose hash does not match. */
export async function readEvidence(dir: string): Promise<BuiltEvidence> {
  const index = await readIndex(dir)
  const files = await scan(dir, MAX_EVIDENCE_FILE_BYTES)
  const runs: EvidenceFile[] = []
  const problems: string[] = []
  for (const cell of index.cells) {
    for (const arm of cell.arms) {
      const bytes = await checkRef(dir, arm.record, `index.json cell ${cell.id}`, problems, files)
      if (bytes !== null) runs.push({ path: arm.record.path, content: bytes.toString('utf8') })
    }
  }
  for (const stored of index.storedBaselines) {
    const bytes = await checkRef(dir, stored.record, `index.json stored baseline ${stored.runId}`, problems, files)
    if (bytes !== null) runs.push({ path: stored.record.path, content: bytes.toString('utf8') })
  }
  if (problems.length > 0) throw new ServegateError('FILE_INVALID', `${dir}: run records do not match the index: ${problems.join('; ')}`)
  return { index: { ...index, artifacts: [] }, runs }
}

/**
 * Reads an ed25519 public key from a PEM file, for `verifyEvidence`'s `publicKey`.
 * @throws ServegateError FILE_INVALID naming `flag` and the file when it cannot be read, CONFIG_INVALID when it holds
 * no ed25519 public key (or a private key, which is refused)
 */
export async function readPublicKey(path: string, flag: string): Promise<KeyObject> {
  const pem = await readFile(path, 'utf8').catch((error: NodeJS.ErrnoException) => {
    throw new ServegateError('FILE_INVALID', `${flag} ${path}: cannot read (${error.code ?? error.message})`, { cause: error })
  })
  // A private key would also give its public half; refuse it, so no private key has to sit where evidence is checked.
  if (pem.includes('PRIVATE KEY'))
    throw new ServegateError(
      'CONFIG_INVALID',
      `${flag} ${path}: holds a private key; pass its public key instead (openssl pkey -in KEY.pem -pubout -out public.pem)`,
    )
  let key: KeyObject
  try {
    key = createPublicKey({ key: pem, format: 'pem' })
  } catch (error) {
    throw new ServegateError(
      'CONFIG_INVALID',
      `${flag} ${path}: not a public key in PEM; pass the ed25519 public key (openssl pkey -pubout)`,
      { cause: error },
    )
  }
  if (key.asymmetricKeyType !== 'ed25519')
    throw new ServegateError('CONFIG_INVALID', `${flag} ${path}: a ${key.asymmetricKeyType ?? 'non-asymmetric'} key, not ed25519`)
  return key
}
