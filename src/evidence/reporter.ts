/**
 * The servegate reporter: runs in vitest's main process (it imports no worker code) and, after
 * a benchmark run or a merge of blob reports, writes the evidence directory from what the spec
 * files and tests carried in their meta.
 */
import { appendFile } from 'node:fs/promises'
import { sep } from 'node:path'
import { execa } from 'execa'
import type { Reporter, TestModule, Vitest } from 'vitest/node'
import { sanitizeMessage } from '../errors.ts'
import { readFileMeta, readTestMeta } from '../schema/task-meta.ts'
import { glanceLines } from './board.ts'
import { buildEvidence, type SpecFileInput, type TestInput } from './build.ts'
import { writeEvidence } from './write.ts'

export interface ServegateReporterOptions {
  evidenceDir: string
  redact: boolean
}

/** `git rev-parse HEAD` in `cwd`, or null outside a git work tree. */
async function gitCommit(cwd: string): Promise<string | null> {
  const result = await execa('git', ['rev-parse', 'HEAD'], { cwd, reject: false, timeout: 10_000 })
  return result.exitCode === 0 && /^[0-9a-f]{40}$/.test(result.stdout.trim()) ? result.stdout.trim() : null
}

/** What the reporter collected from the spec files and their tests. */
export interface CollectedInputs {
  files: SpecFileInput[]
  tests: TestInput[]
  /** Spec files that threw while loading. */
  failedToLoad: string[]
  /** `<file>: <problem>` for every meta that could not be read (another servegate wrote it, or it is malformed). */
  unreadableMeta: string[]
}

/**
 * The spec files' cells and the tests' assertions, as the evidence builder takes them: each
 * meta read with its schema (defaults filled in), a meta that cannot be read left out and
 * counted as a failed test, so the evidence is written but cannot be promoted.
 */
export function collectInputs(modules: ReadonlyArray<TestModule>): CollectedInputs {
  const files: SpecFileInput[] = []
  const tests: TestInput[] = []
  const failedToLoad: string[] = []
  const unreadableMeta: string[] = []
  for (const m of modules) {
    // Relative to the project as the shard saw it: a merge on another runner, checked out at
    // another path, names the same files.
    const file = m.relativeModuleId.split(sep).join('/')
    // A blob from another servegate tags every meta of the file alike: its problem is named once.
    const problems = new Set<string>()
    const rawFile: unknown = m.meta().servegateFile
    if (rawFile !== undefined) {
      const read = readFileMeta(rawFile)
      if (read.ok) files.push({ file, meta: read.meta })
      else problems.add(`its servegate meta ${read.reason === 'version' ? 'was' : 'is'} ${read.problem}`)
    }
    for (const t of m.children.allTests()) {
      const raw: unknown = t.meta().servegate
      const read = raw === undefined ? undefined : readTestMeta(raw)
      if (read?.ok === false)
        problems.add(
          read.reason === 'version'
            ? `its servegate meta was ${read.problem}`
            : `the servegate meta of test "${t.fullName}" is ${read.problem}`,
        )
      tests.push({ file, name: t.fullName, state: t.result().state, meta: read?.ok === true ? read.meta : undefined })
    }
    for (const problem of problems) {
      const message = sanitizeMessage(problem, 500)
      tests.push({ file, name: `(${message})`, state: 'failed', meta: undefined })
      unreadableMeta.push(`${file}: ${message}`)
    }
    // A spec file that threw while loading (a bad declaration, a syntax error) ran none of its
    // cells or tests: it counts as a failed test, so the evidence cannot be promoted without it.
    const [error] = m.errors()
    if (error !== undefined) {
      const message = sanitizeMessage(error.message ?? String(error), 500)
      tests.push({ file, name: `(the file failed to load: ${message})`, state: 'failed', meta: undefined })
      failedToLoad.push(file)
    }
  }
  return { files, tests, failedToLoad, unreadableMeta }
}

/**
 * Writes the evidence after a run of benchmark projects (vitest 5 runs `vitest bench` as
 * benchmark variants of the projects) or a merge of blob reports; after other runs it does
 * nothing.
 */
export class ServegateReporter implements Reporter {
  private vitest: Vitest | null = null
  private merging = false
  private readonly options: ServegateReporterOptions

  constructor(options: ServegateReporterOptions) {
    this.options = options
  }

  onInit(vitest: Vitest): void {
    this.vitest = vitest
    this.merging = vitest.config.mergeReports !== undefined && vitest.config.mergeReports !== ''
  }

  async onTestRunEnd(modules: ReadonlyArray<TestModule>): Promise<void> {
    const bench = modules.some((m) => m.project.config.benchmark?.enabled === true)
    if (!(this.merging || bench) || this.vitest === null) return
    const root = this.vitest.config.root
    const { files, tests, failedToLoad, unreadableMeta } = collectInputs(modules)
    // Nothing of servegate's ran, unless a spec file failed to load or left a meta that cannot be
    // read: then the evidence is written (not promotable) rather than leaving a previous run's.
    if (files.length === 0 && failedToLoad.length === 0 && unreadableMeta.length === 0) return
    const dir = this.options.evidenceDir
    const shard = this.vitest.config.shard
    if (shard !== undefined && !this.merging) {
      this.vitest.logger.log(
        `\nservegate: shard ${shard.index}/${shard.count} wrote no evidence; ` +
          `merge the shards' blob reports (vitest --merge-reports) to write ${dir}/`,
      )
      return
    }
    const built = buildEvidence(files, tests, { suiteCommit: await gitCommit(root), redact: this.options.redact })
    const { DEFAULT_RENDERERS } = await import('./renderers.ts')
    const { index, board } = await writeEvidence(dir, built, DEFAULT_RENDERERS)
    const summary = process.env.GITHUB_STEP_SUMMARY
    if (summary !== undefined && summary !== '') await appendFile(summary, `${board}\n`)
    const log = (line: string) => this.vitest?.logger.log(line)
    log('')
    log('servegate evidence')
    for (const line of glanceLines(index)) log(`  ${line}`)
    log(`  Board: ${dir}/README.md · charts: ${dir}/charts/ · page: ${dir}/index.html · index: ${dir}/index.json`)
    if (unreadableMeta.length > 0) {
      // Every test may have passed, so vitest would exit 0 over evidence that left cells out.
      process.exitCode = 1
      this.vitest.logger.error(`\nservegate: the evidence in ${dir}/ is not promotable: it could not read the meta of`)
      for (const line of unreadableMeta) this.vitest.logger.error(`  ${line}`)
    }
  }
}
