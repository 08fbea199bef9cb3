/**
 * Writes an evidence directory as a whole or not at all: every file goes into a staging
 * directory beside it, which then replaces the old one by rename. A crash while writing leaves
 * the previous evidence as it was (and a stale staging directory, removed by the next write).
 */
import { createPrivateKey, type KeyObject, randomBytes, sign } from 'node:crypto'
import { mkdir, readdir, rename, rm, writeFile } from 'node:fs/promises'
import { basename, dirname, join, resolve } from 'node:path'
import { ServegateError } from '../errors.ts'
import { EvidenceIndex, type FileRef } from '../schema/evidence.ts'
import { renderBoard } from './board.ts'
import { type BuiltEvidence, type EvidenceFile, sha256 } from './build.ts'
import type { Chart } from './charts.ts'

/** How charts and the HTML page are drawn (injected so the writer stays testable on its own). */
export interface Renderers {
  charts(index: EvidenceIndex): Promise<Chart[]>
  /** `runs`: the run record files, which the page reads for the failures of the arms that failed. */
  html(index: EvidenceIndex, board: string, charts: readonly Chart[], runs: readonly EvidenceFile[]): string
}

export const SUMS_FILE = 'SHA256SUMS'

/** The signature of `SHA256SUMS` (base64 ed25519), written when a signing key is given. */
export const SIGNATURE_FILE = 'SHA256SUMS.sig'

/** The index of an evidence directory: `servegate.evidence/v1`. */
export const INDEX_FILE = 'index.json'

/**
 * The files of an evidence directory that `index.json` does not reference: itself and the seal.
 * Every other file written (the run records, the charts, `README.md`, `index.html`) is one the
 * index references (`indexedPaths`), and `servegate verify` refuses any file that is neither.
 */
export const UNINDEXED_FILES: readonly string[] = [INDEX_FILE, SUMS_FILE, SIGNATURE_FILE]

/**
 * What every evidence path is made of: ASCII letters, digits, `.`, `_`, `-`, and `/` between
 * folders. Run records and charts are named through `fileSafe`; a name with anything else (a
 * Cyrillic `і` that looks like `i`, a space, a control character) is not one servegate wrote.
 */
export const SAFE_PATH = /^[A-Za-z0-9._/-]+$/

/**
 * The largest file `servegate verify` reads, in bytes: 1 GiB. A run record is written from one
 * JavaScript string, which holds at most 2^29 − 24 UTF-16 code units (about 512 MiB of a
 * record's ASCII figures); the bound leaves that room twice over for multi-byte text (model
 * names, scored replies) and keeps a planted file from being read into memory whole.
 */
export const MAX_EVIDENCE_FILE_BYTES = 1024 ** 3

/** Every path `index` references: its artifacts, each arm's run record and each stored baseline's. */
export function indexedPaths(index: EvidenceIndex): string[] {
  return [
    ...index.artifacts.map((a) => a.path),
    ...index.cells.flatMap((c) => c.arms.map((a) => a.record.path)),
    ...index.storedBaselines.map((s) => s.record.path),
  ]
}

/** The environment variable holding the ed25519 private key (PEM) that signs the evidence. */
export const SIGNING_KEY_ENV = 'SERVEGATE_SIGNING_KEY'

/**
 * The ed25519 private key in `SERVEGATE_SIGNING_KEY`, or null when it is unset or empty. The key
 * is never printed: a value that is not an ed25519 private key in PEM is an error that says so
 * without quoting it.
 * @throws ServegateError CONFIG_INVALID when the variable is set to something else
 */
export function signingKeyFromEnv(env: NodeJS.ProcessEnv = process.env): KeyObject | null {
  const pem = env[SIGNING_KEY_ENV]
  if (pem === undefined || pem.trim() === '') return null
  const fix = 'set it to the PEM of an ed25519 private key (openssl genpkey -algorithm ed25519), or unset it to write unsigned evidence'
  let key: KeyObject
  try {
    key = createPrivateKey({ key: pem, format: 'pem' })
  } catch (error) {
    throw new ServegateError('CONFIG_INVALID', `${SIGNING_KEY_ENV} is set but is not a private key in PEM; ${fix}`, { cause: error })
  }
  if (key.asymmetricKeyType !== 'ed25519')
    throw new ServegateError(
      'CONFIG_INVALID',
      `${SIGNING_KEY_ENV} holds a ${key.asymmetricKeyType ?? 'non-asymmetric'} key, not ed25519; ${fix}`,
    )
  return key
}

/** The base64 ed25519 signature of the `SHA256SUMS` bytes, with a trailing newline. */
function signSums(sums: string | Uint8Array, key: KeyObject): string {
  return `${sign(null, typeof sums === 'string' ? Buffer.from(sums, 'utf8') : sums, key).toString('base64')}\n`
}

/** How an evidence directory is written. */
export interface WriteOptions {
  /** The ed25519 private key that signs `SHA256SUMS` into `SHA256SUMS.sig`; null: unsigned. @default signingKeyFromEnv() */
  signingKey?: KeyObject | null
}

function ref(file: EvidenceFile): FileRef {
  return { path: file.path, bytes: Buffer.byteLength(file.content), sha256: sha256(file.content) }
}

/** `sha256sum` format over every file, sorted by path. */
export function sumsOf(files: readonly EvidenceFile[]): string {
  return [...files]
    .sort((a, b) => (a.path < b.path ? -1 : 1))
    .map((f) => `${sha256(f.content)}  ${f.path}\n`)
    .join('')
}

/**
 * Every file of an evidence directory, in memory: the run records, the charts, the board
 * (`README.md`), `index.html`, `index.json` listing the artifacts, `SHA256SUMS` over all, and
 * with a signing key `SHA256SUMS.sig`.
 */
async function renderEvidence(
  built: BuiltEvidence,
  renderers: Renderers,
  signingKey: KeyObject | null = null,
): Promise<{ index: EvidenceIndex; files: EvidenceFile[]; board: string }> {
  const charts = await renderers.charts(built.index)
  const chartFiles = charts.map((c) => ({ path: c.file, content: c.svg }))
  const board = renderBoard(built.index, [...built.runs, ...chartFiles].map(ref))
  const boardFile = { path: 'README.md', content: board }
  const htmlFile = { path: 'index.html', content: renderers.html(built.index, board, charts, built.runs) }
  const index = EvidenceIndex.parse({ ...built.index, artifacts: [...chartFiles, boardFile, htmlFile].map(ref) })
  const indexFile = { path: INDEX_FILE, content: `${JSON.stringify(index, null, 2)}\n` }
  const files = [...built.runs, ...chartFiles, boardFile, htmlFile, indexFile]
  const sums = sumsOf(files)
  const signature = signingKey === null ? [] : [{ path: SIGNATURE_FILE, content: signSums(sums, signingKey) }]
  const written = [...files, { path: SUMS_FILE, content: sums }, ...signature]
  checkClosedWorld(index, written)
  return { index, files: written, board }
}

/**
 * Every file to write has a safe name, is written once, and is referenced by the index or is one
 * of `UNINDEXED_FILES`: the rules `servegate verify` holds the directory to.
 * @throws ServegateError INTERNAL naming the file that breaks one
 */
function checkClosedWorld(index: EvidenceIndex, files: readonly EvidenceFile[]): void {
  const known = new Set([...indexedPaths(index), ...UNINDEXED_FILES])
  const seen = new Set<string>()
  const broken = (path: string): string | null => {
    const segments = path.split('/')
    if (segments.includes('..')) return 'escapes the directory'
    if (segments.some((s) => s === '' || s === '.')) return 'has an empty or `.` segment'
    if (!SAFE_PATH.test(path)) return 'holds a character outside the safe set'
    if (seen.has(path)) return 'is written twice'
    if (!known.has(path)) return 'is not referenced by index.json'
    return null
  }
  for (const { path } of files) {
    const why = broken(path)
    if (why !== null)
      throw new ServegateError('INTERNAL', `evidence file path ${why}: ${JSON.stringify(path)}; servegate verify would refuse it`)
    seen.add(path)
  }
}

/** Writes the files into `dir`, replacing what was there only once every file is written. */
export async function writeDirectoryAtomically(dir: string, files: readonly EvidenceFile[]): Promise<void> {
  const target = resolve(dir)
  const parent = dirname(target)
  await mkdir(parent, { recursive: true })
  await removeStale(parent, basename(target))
  const staging = join(parent, `.${basename(target)}.staging-${process.pid}-${randomBytes(4).toString('hex')}`)
  try {
    for (const f of files) {
      const path = join(staging, f.path)
      if (!path.startsWith(staging + '/')) throw new ServegateError('INTERNAL', `evidence file path escapes the directory: ${f.path}`)
      await mkdir(dirname(path), { recursive: true })
      await writeFile(path, f.content)
    }
  } catch (error) {
    await rm(staging, { recursive: true, force: true })
    throw error
  }
  const previous = join(parent, `.${basename(target)}.previous-${process.pid}-${randomBytes(4).toString('hex')}`)
  const hadPrevious = await rename(target, previous).then(
    () => true,
    (error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return false
      throw error
    },
  )
  await rename(staging, target)
  if (hadPrevious) await rm(previous, { recursive: true, force: true })
}

/**
 * Cleans up after earlier writes that did not finish: a write that stopped between its two
 * renames left the old evidence as `previous` and none in place, so that is put back first.
 */
async function removeStale(parent: string, name: string): Promise<void> {
  const entries = await readdir(parent).catch(() => [] as string[])
  const previous = entries.filter((e) => e.startsWith(`.${name}.previous-`))
  if (previous.length > 0 && !entries.includes(name)) await rename(join(parent, previous[0] as string), join(parent, name))
  for (const entry of entries) {
    if (entry.startsWith(`.${name}.staging-`) || (entry.startsWith(`.${name}.previous-`) && entry !== previous[0]))
      await rm(join(parent, entry), { recursive: true, force: true })
  }
  if (previous.length > 0 && entries.includes(name)) await rm(join(parent, previous[0] as string), { recursive: true, force: true })
}

/**
 * Renders and writes a whole evidence directory; returns the index as written. Signed (into
 * `SHA256SUMS.sig`) when `SERVEGATE_SIGNING_KEY` holds an ed25519 private key, unless
 * `options.signingKey` says otherwise; a key that cannot sign fails before anything is written.
 */
export async function writeEvidence(
  dir: string,
  built: BuiltEvidence,
  renderers: Renderers,
  options: WriteOptions = {},
): Promise<{ index: EvidenceIndex; board: string }> {
  const signingKey = options.signingKey === undefined ? signingKeyFromEnv() : options.signingKey
  const { index, files, board } = await renderEvidence(built, renderers, signingKey)
  await writeDirectoryAtomically(dir, files)
  return { index, board }
}
