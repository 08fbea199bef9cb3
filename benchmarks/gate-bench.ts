/**
 * `npm run bench:gate [-- --quick] [-- --estimators] [-- --json FILE] [-- --markdown]` (named `gate-bench.ts`, not
 * `*.bench.ts`, so `vitest bench` does not collect it): calibrates the gates by
 * simulation. The real gates judge simulated matched pairs (log-normal decode and prefill with a
 * per-prompt effect shared by both arms, per-request noise, Pareto scheduler stalls in the time to
 * first output, and a per-launch speed effect) and the outcomes become A/A false-claim rates with
 * Clopper–Pearson bounds, power at +3/5/10%, and the requests a sequential gate used. Then the
 * estimator study (`benchmarks/gate/estimators.ts`; `--estimators` runs it alone): every win
 * estimator's level and power under the clean, preemption, heavy-tail and drift noise models, and
 * the estimator each gate should default to. Prints figures and which targets they meet; never
 * fails on a figure (it is a measurement).
 */
import { writeFile } from 'node:fs/promises'
import { availableParallelism } from 'node:os'
import { parseArgs } from 'node:util'
import { Worker } from 'node:worker_threads'
import { DEFAULT_WIN_ESTIMATOR } from '../src/gates/gate-options.ts'
import { calibrationPlan, type ScenarioResult, SCENARIOS } from './gate/calibrate.ts'
import { chooseEstimators, estimatorStudyCells, estimatorStudyPlan, type EstimatorStudyResult } from './gate/estimators.ts'
import { checkTargets, renderEstimatorMarkdown, renderEstimatorText, renderMarkdown, renderText } from './gate/report.ts'
import { DEFAULT_NOISE } from './gate/simulate.ts'
import type { ScenarioTask } from './gate/worker.ts'

/** The seed of the whole calibration; every figure is reproducible from it. */
export const CALIBRATION_SEED = 20_240_601

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      quick: { type: 'boolean', default: false },
      estimators: { type: 'boolean', default: false },
      json: { type: 'string' },
      markdown: { type: 'boolean', default: false },
    },
  })
  const quick = values.quick === true
  const plan = calibrationPlan(quick)
  const studyPlan = estimatorStudyPlan(quick)
  const started = performance.now()
  const scenarios = values.estimators === true ? [] : SCENARIOS
  const tasks: ScenarioTask[] = [
    ...scenarios.map((scenario, i): ScenarioTask => {
      return { kind: 'scenario', id: i, name: scenario.name, model: DEFAULT_NOISE, scenario, plan, seed: CALIBRATION_SEED + i }
    }),
    ...estimatorStudyCells().map((cell, i): ScenarioTask => {
      const name = `estimators: ${cell.model}, ${cell.base}`
      return { kind: 'estimators', id: scenarios.length + i, name, cell, plan: studyPlan, seed: CALIBRATION_SEED + 1000 + i }
    }),
  ]
  const all = await runPool(tasks, Math.max(1, Math.min(availableParallelism(), tasks.length)))
  const results = all.slice(0, scenarios.length) as ScenarioResult[]
  const estimators = all.slice(scenarios.length) as EstimatorStudyResult[]
  const choices = chooseEstimators(estimators)
  const seconds = (performance.now() - started) / 1000
  if (results.length > 0) console.log(renderText(DEFAULT_NOISE, results, seconds))
  console.log(`\n${renderEstimatorText(estimators, choices, DEFAULT_WIN_ESTIMATOR)}`)
  if (values.markdown === true) {
    if (results.length > 0) console.log(`\n${renderMarkdown(results)}`)
    console.log(`\n${renderEstimatorMarkdown(estimators, choices)}`)
  }
  if (values.json !== undefined) {
    const targets = checkTargets(results)
    const figures = { plan, studyPlan, noise: DEFAULT_NOISE, seed: CALIBRATION_SEED, seconds, results, targets, estimators, choices }
    await writeFile(values.json, `${JSON.stringify(figures, null, 2)}\n`)
  }
}

/**
 * Runs the scenarios on worker threads, the costliest first (they were listed that way), and
 * returns their results in scenario order. Each result depends only on its task, so the figures
 * are the same whatever the thread count.
 */
async function runPool(tasks: readonly ScenarioTask[], threads: number): Promise<(ScenarioResult | EstimatorStudyResult)[]> {
  const results = new Array<ScenarioResult | EstimatorStudyResult>(tasks.length)
  const queue = [...tasks]
  const workers = Array.from({ length: threads }, () => new Worker(new URL('./gate/worker.ts', import.meta.url)))
  try {
    await Promise.all(
      workers.map(
        (worker) =>
          new Promise<void>((resolve, reject) => {
            const next = () => {
              const task = queue.shift()
              if (task === undefined) return resolve()
              console.error(`start: ${task.name}`)
              worker.postMessage(task)
            }
            worker.on('message', (message: { id: number; progress?: string; result?: ScenarioResult | EstimatorStudyResult }) => {
              if (message.progress !== undefined) console.error(message.progress)
              if (message.result !== undefined) {
                results[message.id] = message.result
                next()
              }
            })
            worker.on('error', reject)
            next()
          }),
      ),
    )
  } finally {
    await Promise.all(workers.map((w) => w.terminate()))
  }
  return results
}

if (import.meta.main) await main()
