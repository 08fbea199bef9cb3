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
import { glanceLines } from './board.ts'
import { buildEvidence, type SpecFileInput, type TestInput } from './build.ts'
import { writeEvidence } from './write.ts'

export interface ServegateReporterOptions {
  evidenceDir: string
  redact: boolean
}

/** `git rev-parse HEAD` in `cwd`, or null outside a git work tree. */
export async function gitCommit(cwd: string): Promise<string | null> {
  const result = await execa('git', ['rev-parse', 'HEAD'], { cwd, reject: false, timeout: 10_000 })
  return result.exitCode === 0 && /^[0-9a-f]{40}$/.test(result.stdout.trim()) ? result.stdout.trim() : null
}

/** The spec files' cells and the tests' assertions, as the evidence builder takes them. */
export function collectInputs(modules: ReadonlyArray<TestModule>): { files: SpecFileInput[]; tests: TestInput[]; failedToLoad: string[] } {
  const files: SpecFileInput[] = []
  const tests: TestInput[] = []
  const failedToLoad: string[] = []
  for (const m of modules) {
    // Relative to the project as the shard saw it: a merge on another runner, checked out at
    // another path, names the same files.
    const file = m.relativeModuleId.split(sep).join('/')
    const meta = m.meta().servegateFile
    if (meta !== undefined) files.push({ file, meta })
    for (const t of m.children.allTests()) {
      tests.push({ file, name: t.fullName, state: t.result().state, meta: t.meta().servegate })
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
  return { files, tests, failedToLoad }
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
    const { files, tests, failedToLoad } = collectInputs(modules)
    // Nothing of servegate's ran, unless a spec file failed to load: then the evidence is written
    // (not promotable) rather than leaving a previous run's in place.
    if (files.length === 0 && failedToLoad.length === 0) return
    const dir = this.options.evidenceDir
    const shard = this.vitest.config.shard
    if (shard !== undefined && !this.merging) {
      this.vitest.logger.log(
        `\nservegate: shard ${shard.index}/${shard.count} wrote no evidence; merge the shards' blob reports (vitest --merge-reports) to write ${dir}/`,
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
  }
}
