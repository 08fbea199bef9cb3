/**
 * The servegate reporter: runs in vitest's main process (it imports no worker code) and, after
 * a benchmark run or a merge of blob reports, writes the evidence directory from what the spec
 * files and tests carried in their meta.
 */
import { appendFile, glob } from 'node:fs/promises'
import { basename, relative, sep } from 'node:path'
import { execa } from 'execa'
import type { Reporter, TestCase, TestModule, TestRunEndReason, Vitest } from 'vitest/node'
import { sanitizeMessage } from '../errors.ts'
import { figureLine } from '../gates/figure-line.ts'
import { readFileMeta, readTestMeta } from '../schema/task-meta.ts'
import type { NoiseOptions } from '../schema/worker-options.ts'
import { glanceLines } from './board.ts'
import { buildEvidence, type RunScope, type SpecFileInput, type TestInput } from './build.ts'
import { currentBranch, currentCommit, recordHistory } from './history-of-main.ts'
import { PARTIAL_FIX, partialHeadline } from './partial-text.ts'
import { evidenceTarget, type PartialEvidence, runScope } from './run-scope.ts'
import { readIndex } from './verify.ts'
import { reportersOf } from './vitest-reporters.ts'
import { writeEvidence } from './write.ts'

export interface ServegateReporterOptions {
  evidenceDir: string
  redact: boolean
  /**
   * What a partial run (a file list, `-t`, `.only`, an interrupted run) does when `evidenceDir`
   * holds a complete run's evidence: `beside` keeps it and writes to `<evidenceDir>-partial`,
   * `replace` writes over it. Either way the partial evidence says it is partial and is not promotable.
   * @default 'beside'
   */
  partialEvidence?: PartialEvidence
  /**
   * The plugin's `noise` option: with `history` set, a complete run on `historyBranch` appends
   * its gated figures to the history of main, and the evidence draws their trend.
   */
  noise?: NoiseOptions
}

/**
 * The figure lines of a test: each gate's decisive figure (`figureLine`), after the test's mark.
 * @example figureLines(test) // ['   ✓ c4 wins decode › toWinDecode c4: decode +94.6% [+71%, +121%] > +5%: pass (98% interval, …)']
 */
function figureLines(test: Pick<TestCase, 'fullName' | 'meta' | 'result'>): string[] {
  const raw: unknown = test.meta().servegate
  const read = raw === undefined ? undefined : readTestMeta(raw)
  if (read?.ok !== true) return []
  const state = test.result().state
  const mark = state === 'passed' ? '✓' : state === 'failed' ? '×' : '↓'
  return read.meta.decisions.map((d) => `   ${mark} ${test.fullName} › ${figureLine(d)}`)
}

/** The files `include` names under `root` (outside node_modules), relative to it and `/`-separated, sorted. */
async function benchFiles(include: readonly string[], root: string): Promise<string[]> {
  const files: string[] = []
  if (include.length === 0) return files
  const found = glob([...include], { cwd: root, exclude: (path: string) => basename(path) === 'node_modules' })
  for await (const path of found) files.push(path.split(sep).join('/'))
  return files.sort()
}

/** The spec files of a module's project, as `collectInputs` names them. */
function fileOf(m: Pick<TestModule, 'relativeModuleId'>): string {
  return m.relativeModuleId.split(sep).join('/')
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
    const file = fileOf(m)
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
 * nothing. Under each spec file vitest reports, it prints each gate's decisive figure (unless
 * vitest's verbose reporter already prints them as annotations, or no reporter of vitest writes
 * for a person). A run that did not cover the suite writes evidence that says it is partial, and
 * never over a complete run's (see `partialEvidence`).
 */
export class ServegateReporter implements Reporter {
  private vitest: Vitest | null = null
  private merging = false
  private figures = false
  private readonly options: ServegateReporterOptions

  constructor(options: ServegateReporterOptions) {
    this.options = options
  }

  onInit(vitest: Vitest): void {
    this.vitest = vitest
    this.merging = vitest.config.mergeReports !== undefined && vitest.config.mergeReports !== ''
    const reporters = reportersOf(vitest)
    this.figures = reporters.terminal && !reporters.verbose
  }

  /** After vitest's own reporters printed the file: its gates' figures, for passing tests too. */
  onTestModuleEnd(m: TestModule): void {
    if (!this.figures || this.vitest === null) return
    if (!(this.merging || m.project.config.benchmark?.enabled === true)) return
    const lines = [...m.children.allTests()].flatMap((t) => figureLines(t))
    for (const line of lines) this.vitest.logger.log(line)
  }

  async onTestRunEnd(modules: ReadonlyArray<TestModule>, _errors?: unknown, reason?: TestRunEndReason): Promise<void> {
    const bench = modules.some((m) => m.project.config.benchmark?.enabled === true)
    if (!(this.merging || bench) || this.vitest === null) return
    const vitest = this.vitest
    const root = vitest.config.root
    const { files, tests, failedToLoad, unreadableMeta } = collectInputs(modules)
    // Nothing of servegate's ran, unless a spec file failed to load or left a meta that cannot be
    // read: then the evidence is written (not promotable) rather than leaving a previous run's.
    if (files.length === 0 && failedToLoad.length === 0 && unreadableMeta.length === 0) return
    const shard = vitest.config.shard
    if (shard !== undefined && !this.merging) {
      vitest.logger.log(
        `\nservegate: shard ${shard.index}/${shard.count} wrote no evidence; ` +
          `merge the shards' blob reports (vitest --merge-reports) to write ${this.options.evidenceDir}/`,
      )
      return
    }
    const scope = await this.scopeOf(modules, reason === 'interrupted')
    const existing = scope.reasons.length === 0 ? null : await readIndex(this.options.evidenceDir).catch(() => null)
    const target = evidenceTarget(this.options.evidenceDir, scope, existing, this.options.partialEvidence ?? 'beside')
    const dir = target.dir
    const suiteCommit = await gitCommit(root)
    const built = buildEvidence(files, tests, { suiteCommit, redact: this.options.redact, scope })
    const noise = this.options.noise
    if (noise?.history !== undefined) {
      const branch = await currentBranch(process.env, root)
      const history = await recordHistory({
        noise: { ...noise, history: noise.history },
        files,
        index: built.index,
        branch,
        commit: currentCommit(process.env, suiteCommit),
      })
      built.index = { ...built.index, history }
    }
    const { DEFAULT_RENDERERS } = await import('./renderers.ts')
    const { index, board } = await writeEvidence(dir, built, DEFAULT_RENDERERS)
    const summary = process.env.GITHUB_STEP_SUMMARY
    if (summary !== undefined && summary !== '') await appendFile(summary, `${board}\n`)
    // With no reporter of vitest's writing for a person (e.g. --reporter=json to stdout), stdout is theirs.
    const log = reportersOf(vitest).terminal ? (line: string) => vitest.logger.log(line) : (line: string) => vitest.logger.error(line)
    log('')
    log(index.partial === null ? 'servegate evidence' : 'servegate evidence (partial run)')
    for (const line of glanceLines(index)) log(`  ${line}`)
    const history = index.history
    if (history !== null)
      log(history.appended ? `  History of main: appended to ${history.path}` : `  History of main: not appended (${history.reason ?? ''})`)
    log(`  Board: ${dir}/README.md · charts: ${dir}/charts/ · page: ${dir}/index.html · index: ${dir}/index.json`)
    if (index.partial !== null) {
      const kept = target.keptComplete
        ? `${this.options.evidenceDir}/ keeps the complete run's evidence; this run's is in ${dir}/ ` +
          "(servegate({ partialEvidence: 'replace' }) writes a partial run over it)"
        : `${dir}/ holds this run's evidence, marked partial`
      vitest.logger.error(`\nservegate: warning: ${partialHeadline(index.partial)} ${kept}; ${PARTIAL_FIX}.`)
    }
    if (unreadableMeta.length > 0) {
      // Every test may have passed, so vitest would exit 0 over evidence that left cells out.
      process.exitCode = 1
      vitest.logger.error(`\nservegate: the evidence in ${dir}/ is not promotable: it could not read the meta of`)
      for (const line of unreadableMeta) vitest.logger.error(`  ${line}`)
    }
  }

  /**
   * Whether this run covered the suite: the spec files its benchmark projects include against those
   * that ran (a merge: those the blobs hold), `-t`, `.only`, and whether it was interrupted.
   */
  private async scopeOf(modules: ReadonlyArray<TestModule>, interrupted: boolean): Promise<RunScope> {
    const vitest = this.vitest as Vitest
    const suiteFiles: string[] = []
    const bench = vitest.projects.filter((p) => p.config.benchmark?.enabled === true)
    for (const project of bench) {
      const { testFiles } = await project.globTestFiles().catch(() => ({ testFiles: [] as string[] }))
      suiteFiles.push(...testFiles.map((f) => relative(project.config.root, f).split(sep).join('/')))
    }
    // A merge has no benchmark project: the files the config's benchmark include names stand for the suite.
    if (bench.length === 0)
      for (const project of vitest.projects)
        suiteFiles.push(...(await benchFiles(project.config.benchmark?.include ?? [], project.config.root)))
    const tests = modules.flatMap((m) => [...m.children.allTests()])
    const pattern = vitest.config.testNamePattern
    return runScope({
      suiteFiles,
      // A file whose every test a filter skipped was never run: it declared no cells.
      ranFiles: modules.filter((m) => m.state() !== 'skipped').map(fileOf),
      testNamePattern: pattern === undefined ? null : typeof pattern === 'string' ? pattern : pattern.source,
      only:
        tests.some((t) => t.options.mode === 'only') ||
        modules.some((m) => [...m.children.allSuites()].some((s) => s.options.mode === 'only')),
      skippedTests: tests.filter((t) => t.result().state === 'skipped').length,
      interrupted,
    })
  }
}
