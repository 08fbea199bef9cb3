/**
 * Writes an evidence directory as a whole or not at all: every file goes into a staging
 * directory beside it, which then replaces the old one by rename. A crash while writing leaves
 * the previous evidence as it was (and a stale staging directory, removed by the next write).
 */
import { randomBytes } from 'node:crypto'
import { mkdir, readdir, rename, rm, writeFile } from 'node:fs/promises'
import { basename, dirname, join, resolve } from 'node:path'
import { EvidenceIndex, type FileRef } from '../schema/evidence.ts'
import { renderBoard } from './board.ts'
import { type BuiltEvidence, type EvidenceFile, sha256 } from './build.ts'
import type { Chart } from './charts.ts'

/** How charts and the HTML page are drawn (injected so the writer stays testable on its own). */
export interface Renderers {
  charts(index: EvidenceIndex): Promise<Chart[]>
  html(index: EvidenceIndex, board: string, charts: readonly Chart[]): string
}

export const SUMS_FILE = 'SHA256SUMS'

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
 * (`README.md`), `index.html`, `index.json` listing the artifacts, and `SHA256SUMS` over all.
 */
export async function renderEvidence(
  built: BuiltEvidence,
  renderers: Renderers,
): Promise<{ index: EvidenceIndex; files: EvidenceFile[]; board: string }> {
  const charts = await renderers.charts(built.index)
  const chartFiles = charts.map((c) => ({ path: c.file, content: c.svg }))
  const board = renderBoard(built.index, [...built.runs, ...chartFiles].map(ref))
  const boardFile = { path: 'README.md', content: board }
  const htmlFile = { path: 'index.html', content: renderers.html(built.index, board, charts) }
  const index = EvidenceIndex.parse({ ...built.index, artifacts: [...chartFiles, boardFile, htmlFile].map(ref) })
  const indexFile = { path: 'index.json', content: `${JSON.stringify(index, null, 2)}\n` }
  const files = [...built.runs, ...chartFiles, boardFile, htmlFile, indexFile]
  return { index, files: [...files, { path: SUMS_FILE, content: sumsOf(files) }], board }
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
      if (!path.startsWith(staging + '/')) throw new Error(`evidence file path escapes the directory: ${f.path}`)
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

/** Renders and writes a whole evidence directory; returns the index as written. */
export async function writeEvidence(
  dir: string,
  built: BuiltEvidence,
  renderers: Renderers,
): Promise<{ index: EvidenceIndex; board: string }> {
  const { index, files, board } = await renderEvidence(built, renderers)
  await writeDirectoryAtomically(dir, files)
  return { index, board }
}
