/**
 * `npm run bench:gate [-- --quick] [-- --json FILE] [-- --markdown]` (named `gate-bench.ts`, not `*.bench.ts`, so `vitest bench` does not
 * collect it): calibrates the gates by
 * simulation. The real gates judge simulated matched pairs (log-normal decode and prefill with a
 * per-prompt effect shared by both arms, per-request noise, Pareto scheduler stalls in the time to
 * first output, and a per-launch speed effect) and the outcomes become A/A false-claim rates with
 * Clopper–Pearson bounds, power at +3/5/10%, and the requests a sequential gate used. Prints
 * figures and which targets they meet; never fails on a figure (it is a measurement).
 */
import { writeFile } from 'node:fs/promises'
import { availableParallelism } from 'node:os'
import { parseArgs } from 'node:util'
import { Worker } from 'node:worker_threads'
import { calibrationPlan, type ScenarioResult, SCENARIOS } from './gate/calibrate.ts'
import { checkTargets, renderMarkdown, renderText } from './gate/report.ts'
import { DEFAULT_NOISE } from './gate/simulate.ts'
import type { ScenarioTask } from './gate/worker.ts'

/** The seed of the whole calibration; every figure is reproducible from it. */
export const CALIBRATION_SEED = 20_240_601

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { quick: { type: 'boolean', default: false }, json: { type: 'string' }, markdown: { type: 'boolean', default: false } },
  })
  const plan = calibrationPlan(values.quick === true)
  const started = performance.now()
  const tasks: ScenarioTask[] = SCENARIOS.map((scenario, i) => ({
    id: i,
    model: DEFAULT_NOISE,
    scenario,
    plan,
    seed: CALIBRATION_SEED + i,
  }))
  const results = await runPool(tasks, Math.max(1, Math.min(availableParallelism(), tasks.length)))
  const seconds = (performance.now() - started) / 1000
  console.log(renderText(DEFAULT_NOISE, results, seconds))
  if (values.markdown === true) console.log(`\n${renderMarkdown(results)}`)
  if (values.json !== undefined) {
    await writeFile(
      values.json,
      `${JSON.stringify(
        { plan, noise: DEFAULT_NOISE, seed: CALIBRATION_SEED, seconds, results, targets: checkTargets(results) },
        null,
        2,
      )}\n`,
    )
  }
}

/**
 * Runs the scenarios on worker threads, the costliest first (they were listed that way), and
 * returns their results in scenario order. Each result depends only on its task, so the figures
 * are the same whatever the thread count.
 */
async function runPool(tasks: readonly ScenarioTask[], threads: number): Promise<ScenarioResult[]> {
  const results = new Array<ScenarioResult>(tasks.length)
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
              console.error(`start: ${task.scenario.name}`)
              worker.postMessage(task)
            }
            worker.on('message', (message: { id: number; progress?: string; result?: ScenarioResult }) => {
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
