/**
 * The history of main as the reporter keeps it: this run's gated figures as one history run,
 * whether it is appended (a complete run on the history's branch), and the trend of each figure
 * across the runs of main that the evidence draws.
 */
import { execa } from 'execa'
import { historyFigure, isHistoryMetric } from '../gates/history-figures.ts'
import { testbedMismatch, testbedOf } from '../gates/noise-floor.ts'
import { appendHistory, type HistoryArm, historyCellKey, readHistory } from '../record/history-store.ts'
import type { EvidenceHistory, EvidenceIndex, HistoryTrend, TrendPoint } from '../schema/evidence.ts'
import { HISTORY_SCHEMA_ID, type HistoryCell, type HistoryRun } from '../schema/noise.ts'
import type { RunRecord } from '../schema/run.ts'
import { type NoiseOptions, RUNNER_ENV } from '../schema/worker-options.ts'
import type { SpecFileInput } from './build.ts'

/** Runs of main the trend shows, the latest. */
const HISTORY_TREND_RUNS = 30

const Z95 = 1.96

/** Where and when this run happened, as the history names it. */
export interface HistoryContext {
  /** The runner's label (the testbed's `runner`); null when none was given. */
  runner: string | null
  commit: string | null
  branch: string | null
  /** When the run finished, ISO 8601. */
  at: string
}

/** Every run record of the spec files, by `runId`. */
function recordsById(files: readonly SpecFileInput[]): Map<string, RunRecord> {
  const byId = new Map<string, RunRecord>()
  for (const f of files)
    for (const c of f.meta.cells)
      for (const records of [c.records.cell, c.records.baseline, c.records.candidate])
        for (const r of records ?? []) if (!byId.has(r.runId)) byId.set(r.runId, r)
  return byId
}

/** The arms a gate judged that were measured in this run, each with the runId of its first launch. */
function judgedArms(judged: EvidenceIndex['gates'][number]['judged']): { arm: HistoryArm; runId: string }[] {
  if (judged.kind === 'cell') return [{ arm: 'cell', runId: judged.records[0] as string }]
  if (judged.kind !== 'pair') return []
  const candidate = { arm: 'candidate' as const, runId: judged.candidate[0] as string }
  // A stored baseline is another run's launch, already in the history if that run was main's.
  return judged.storedBaseline === null ? [{ arm: 'baseline', runId: judged.baseline[0] as string }, candidate] : [candidate]
}

/**
 * This run's gated figures as one history run: for every accepted cell's gate on a metric the
 * history keeps (`isHistoryMetric`), the figure of the first launch of each arm it judged (a
 * history figure is one launch's, the unit launch noise is about), keyed by `historyCellKey`
 * with the launch's testbed.
 */
export function historyRunOf(files: readonly SpecFileInput[], index: EvidenceIndex, context: HistoryContext): HistoryRun {
  const records = recordsById(files)
  const accepted = new Set(index.cells.filter((c) => c.disposition === 'accepted').map((c) => c.id))
  const cells = new Map<string, HistoryCell>()
  for (const gate of index.gates) {
    const metric = gate.decision.metric
    if (!accepted.has(gate.cell) || !isHistoryMetric(metric)) continue
    for (const { arm, runId } of judgedArms(gate.judged)) {
      const record = records.get(runId)
      const figure = record === undefined ? null : historyFigure(record, metric)
      if (record === undefined || figure === null) continue
      const key = historyCellKey(gate.cell, arm)
      const cell = cells.get(key) ?? { cell: key, testbed: testbedOf(record, context.runner), metrics: {} }
      cell.metrics[metric] ??= figure
      cells.set(key, cell)
    }
  }
  return {
    schema: HISTORY_SCHEMA_ID,
    commit: context.commit,
    branch: context.branch,
    at: context.at,
    cells: [...cells.values()].sort((a, b) => (a.cell < b.cell ? -1 : a.cell > b.cell ? 1 : 0)),
  }
}

/**
 * Why this run is not appended to the history, or null when it is: only a complete run on the
 * history's branch with at least one gated figure is.
 */
export function notAppendedReason(run: HistoryRun, index: Pick<EvidenceIndex, 'partial'>, historyBranch: string): string | null {
  if (run.branch === null)
    return `the branch is unknown (no GITHUB_REF_NAME, CI_COMMIT_BRANCH or BUILDKITE_BRANCH, and git names none), so it may not be ${historyBranch}`
  if (run.branch !== historyBranch) return `a run on ${run.branch}, not ${historyBranch}`
  if (index.partial !== null) return 'a partial run: its figures do not stand for the suite'
  if (run.cells.length === 0) return 'no accepted cell has a gated rate or latency figure to keep'
  return null
}

function pointOf(run: HistoryRun, figure: { value: number; relativeSe: number | null }): TrendPoint {
  const se = figure.relativeSe
  return {
    commit: run.commit,
    at: run.at,
    value: figure.value,
    low: se === null ? null : figure.value * Math.exp(-Z95 * se),
    high: se === null ? null : figure.value * Math.exp(Z95 * se),
  }
}

/**
 * The trend of each of this run's gated figures: the last `last` runs of main that measured the
 * same cell's arm and metric on the same testbed, oldest first, each with its 95% interval
 * (value × exp(±1.96 × relativeSe) where the run's standard error is known), and this run's
 * point. Figures no run of main measured on this testbed have no trend.
 */
export function historyTrends(runs: readonly HistoryRun[], current: HistoryRun, last = HISTORY_TREND_RUNS): HistoryTrend[] {
  const trends: HistoryTrend[] = []
  for (const cell of current.cells) {
    for (const [metric, figure] of Object.entries(cell.metrics)) {
      const main: TrendPoint[] = []
      for (const run of runs) {
        const same = run.cells.find((c) => c.cell === cell.cell && testbedMismatch(c.testbed, cell.testbed) === null)
        const f = same?.metrics[metric]
        if (f !== undefined) main.push(pointOf(run, f))
      }
      if (main.length > 0)
        trends.push({ cell: cell.cell, metric, testbed: cell.testbed, main: main.slice(-last), current: pointOf(current, figure) })
    }
  }
  return trends
}

/**
 * The branch this run is on: the CI's variable (GitHub Actions, GitLab, Buildkite), else git's
 * current branch (null when detached or outside a work tree).
 */
export async function currentBranch(env: NodeJS.ProcessEnv, cwd: string): Promise<string | null> {
  for (const name of ['GITHUB_REF_NAME', 'CI_COMMIT_BRANCH', 'BUILDKITE_BRANCH']) {
    const value = env[name]
    if (value !== undefined && value !== '') return value
  }
  const result = await execa('git', ['rev-parse', '--abbrev-ref', 'HEAD'], { cwd, reject: false, timeout: 10_000 })
  const branch = result.exitCode === 0 ? result.stdout.trim() : ''
  return branch === '' || branch === 'HEAD' ? null : branch
}

/** The commit this run measured: the CI's variable, else the suite's `git rev-parse HEAD`. */
export function currentCommit(env: NodeJS.ProcessEnv, suiteCommit: string | null): string | null {
  for (const name of ['GITHUB_SHA', 'CI_COMMIT_SHA', 'BUILDKITE_COMMIT']) {
    const value = env[name]
    if (value !== undefined && value !== '') return value
  }
  return suiteCommit
}

/** What `recordHistory` needs beyond the evidence. */
export interface RecordHistoryInputs {
  noise: Pick<NoiseOptions, 'history' | 'historyBranch' | 'runner'> & { history: string }
  files: readonly SpecFileInput[]
  index: EvidenceIndex
  branch: string | null
  commit: string | null
  env?: NodeJS.ProcessEnv
}

/**
 * Reads the history of main, appends this run when it is a complete run on the history's
 * branch, and returns what the evidence keeps of it: whether it was appended and why not, and
 * the trend of this run's figures. A history that cannot be read is neither appended to nor
 * drawn; the reason names the file and line. One that cannot be written says so in the reason.
 */
export async function recordHistory(inputs: RecordHistoryInputs): Promise<EvidenceHistory> {
  const { noise, index, branch } = inputs
  const path = noise.history
  const runner = noise.runner ?? nonEmpty((inputs.env ?? process.env)[RUNNER_ENV])
  const at = index.generatedAt ?? new Date().toISOString()
  const current = historyRunOf(inputs.files, index, { runner, commit: inputs.commit, branch, at })
  let runs: HistoryRun[]
  try {
    runs = await readHistory(path)
  } catch (error) {
    return { path, branch, appended: false, reason: (error as Error).message, trend: [] }
  }
  let reason = notAppendedReason(current, index, noise.historyBranch)
  if (reason === null) {
    // A history that cannot be written (a read-only cache, a full disk) must not cost the run its evidence.
    reason = await appendHistory(path, current).then(
      () => null,
      (error: unknown) => `cannot append to ${path}: ${(error as Error).message}`,
    )
  }
  const trend = historyTrends(reason === null ? [...runs, current] : runs, current)
  return { path, branch, appended: reason === null, reason, trend }
}

function nonEmpty(value: string | undefined): string | null {
  return value === undefined || value === '' ? null : value
}
