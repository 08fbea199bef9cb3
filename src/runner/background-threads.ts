import { execFile } from 'node:child_process'
import { readdir, readFile } from 'node:fs/promises'
import { getPriority, setPriority } from 'node:os'
import { setTimeout as sleep } from 'node:timers/promises'
import { IdleCpus } from './idle-cpus.ts'

/**
 * The threads Node runs beside the JavaScript ones, by the names Linux gives them: V8's platform
 * workers (concurrent compilation, marking, sweeping, the collectors' helpers), V8's delayed-task
 * scheduler, and libuv's threadpool (file system, DNS).
 */
const BACKGROUND_THREADS: ReadonlySet<string> = new Set(['V8Worker', 'DelayedTaskSche', 'libuv-worker'])
/** Linux's `SCHED_BATCH` policy number, as `/proc/PID/task/TID/stat` shows it. */
const SCHED_BATCH = 3
/** The `policy` field of `/proc/PID/task/TID/stat`, counted from the first field after the `(comm)` one. */
const POLICY_FIELD = 38

/** One of this process's threads. */
export interface ThreadPolicy {
  tid: number
  /** Its name (`/proc/self/task/TID/comm`). */
  name: string
  /** Its scheduling policy: 0 `SCHED_OTHER`, 3 `SCHED_BATCH`, 5 `SCHED_IDLE`, … */
  policy: number
}

/** This process's threads and their policies; empty off Linux. A thread that ends while read is left out. */
export async function threadPolicies(): Promise<ThreadPolicy[]> {
  let tids: string[]
  try {
    tids = await readdir('/proc/self/task')
  } catch {
    return []
  }
  const threads = await Promise.all(
    tids.map(async (tid): Promise<ThreadPolicy | null> => {
      try {
        const [comm, stat] = await Promise.all([
          readFile(`/proc/self/task/${tid}/comm`, 'utf8'),
          readFile(`/proc/self/task/${tid}/stat`, 'utf8'),
        ])
        const policy = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[POLICY_FIELD])
        return { tid: Number(tid), name: comm.trim(), policy }
      } catch {
        return null
      }
    }),
  )
  return threads.filter((t): t is ThreadPolicy => t !== null)
}

function chrtBatch(tid: number): Promise<boolean> {
  return new Promise((resolve) => {
    execFile('chrt', ['--batch', '--pid', '0', String(tid)], { timeout: 5000 }, (error) => resolve(error === null))
  })
}

/**
 * Puts Node's background threads of this process (`BACKGROUND_THREADS`) under Linux's
 * `SCHED_BATCH` policy, with `chrt` from util-linux, best effort: where there is no `/proc` or no
 * `chrt`, or the kernel refuses, they stay as they were.
 *
 * Why: a thread that measures shares its core with them, and V8 hands them work at moments it
 * chooses, when a function reaches the calls at which it is optimized or a collection starts.
 * Under the default policy the woken worker preempts the measuring thread at once, even before
 * that thread has stamped the read it is handling: on one core at C = 1 a compilation took the
 * thread for 1.0–1.3 ms at the same read of every run, and the ITL error p99 was 0.40–0.87 ms
 * against 0.14–0.46 ms with the workers batched (alternated runs). A batched thread keeps its
 * full share of the CPU (its weight is unchanged, unlike a niceness, which starved the
 * collectors' helpers and grew the heap); it only never preempts a thread on waking, so it runs
 * when the measuring thread waits for I/O, or at the next scheduler tick. Unprivileged processes
 * may set it on their own threads.
 * @returns the threads that are batched now
 */
export async function batchBackgroundThreads(): Promise<number> {
  const background = (await threadPolicies()).filter((t) => BACKGROUND_THREADS.has(t.name))
  const batched = await Promise.all(background.map((t) => (t.policy === SCHED_BATCH ? true : chrtBatch(t.tid))))
  return batched.filter(Boolean).length
}

/** V8's platform workers, by the name Linux gives them. */
const V8_WORKER = 'V8Worker'
/** The thread ids of this process's V8 workers; empty off Linux. */
async function v8WorkerTids(): Promise<number[]> {
  return (await threadPolicies()).filter((t) => t.name === V8_WORKER).map((t) => t.tid)
}

/** How often {@link v8WorkersQuiet} reads V8's workers' CPU time, ms. */
const QUIET_POLL_MS = 2
/** CPU time, ms, V8's workers may take between two readings and still count as quiet. */
const QUIET_BELOW_MS = 0.1

/** The CPU time each of V8's workers has run so far, ms, by thread id (`/proc/self/task/TID/schedstat`). */
async function v8WorkerRunMs(tids: readonly number[]): Promise<Map<number, number>> {
  const runs = new Map<number, number>()
  await Promise.all(
    tids.map(async (tid) => {
      try {
        runs.set(tid, Number((await readFile(`/proc/self/task/${tid}/schedstat`, 'latin1')).split(' ')[0]) / 1e6)
      } catch {
        // A worker that ended.
      }
    }),
  )
  return runs
}

/**
 * Waits until V8's workers have nothing to run: their CPU time, read every 2 ms, stops growing
 * (under 0.1 ms between readings), for at most `maxMs`.
 *
 * Why: building a closed loop's opening round runs its build path a few hundred times, which makes
 * V8 compile it, on its workers. Where they share the measuring thread's core they would take it in
 * the middle of the round for up to a scheduler tick (4 ms at 250 Hz) each. Waited out first (and
 * the young generation collected), the round at C = 256 on one core went out in 5.0–5.6 ms in 4
 * runs, against 7.0–11.9 ms in 5 without the wait, alternated. Off Linux (no `/proc`), it waits
 * `maxMs` once.
 * @returns the ms waited
 */
export async function v8WorkersQuiet(maxMs = 30): Promise<number> {
  const started = performance.now()
  const tids = await v8WorkerTids()
  if (tids.length === 0) {
    await sleep(maxMs)
    return performance.now() - started
  }
  let before = await v8WorkerRunMs(tids)
  while (performance.now() - started < maxMs) {
    await sleep(QUIET_POLL_MS)
    const now = await v8WorkerRunMs(tids)
    let ran = 0
    for (const [tid, ms] of now) ran += ms - (before.get(tid) ?? ms)
    if (ran < QUIET_BELOW_MS) break
    before = now
  }
  return performance.now() - started
}

/** The niceness V8's workers take while the measuring thread has room to spare. */
const YIELDING_NICENESS = 19
/** How often {@link WorkerYield} reads the measuring thread's CPU share, ms. */
const YIELD_SAMPLE_MS = 100
/** The measuring thread's CPU share over a sample below which the workers yield. */
const YIELD_BELOW_SHARE = 0.9
/** The share above which they get their share of the core back: the thread leaves them next to no idle time. */
const RESTORE_ABOVE_SHARE = 0.97
/** Cores of the process's CPUs that must have stood idle over a reading for the workers to yield. */
const YIELD_WITH_IDLE_CORES = 0.25
/** Idle cores below which they get their share back: other processes want the CPUs. */
const RESTORE_BELOW_IDLE_CORES = 0.1

/** When {@link WorkerYield} reads the measuring thread's share and what it does at which. */
export interface WorkerYieldLimits {
  /** ms between readings. @default 100 */
  sampleMs?: number
  /** The share of a core over a reading below which the workers yield. @default 0.9 */
  yieldBelowShare?: number
  /** The share above which they get their share back. @default 0.97 */
  restoreAboveShare?: number
  /** Cores of the process's CPUs idle over a reading, at least, for the workers to yield. @default 0.25 */
  yieldWithIdleCores?: number
  /** Idle cores below which they get their share back. @default 0.1 */
  restoreBelowIdleCores?: number
}

/** One reading: what the measuring thread used and what the machine left idle. */
export interface YieldReading {
  /** The share of a core the measuring thread used since the last reading. */
  share: number
  /** Cores of the CPUs this process may run on that stood idle since then; null where unknown. */
  idleCores: number | null
}

/** Whether this process may set thread `tid`'s niceness and set it back (a lower niceness needs `CAP_SYS_NICE`). */
function canRenice(tid: number): boolean {
  try {
    const niceness = getPriority(tid)
    setPriority(tid, niceness < YIELDING_NICENESS ? niceness + 1 : niceness - 1)
    setPriority(tid, niceness)
    return true
  } catch {
    return false
  }
}

/**
 * Lowers V8's worker threads to niceness 19 while the measuring thread leaves its core some idle
 * time (under 90% of a core over the last 100 ms) and the CPUs it may run on stand partly idle (a
 * quarter of a core or more), and gives them their share back once it leaves next to none (over
 * 97%) or they do not (under a tenth of a core idle).
 *
 * Why: a worker that V8 hands a compilation or a marking step while the measuring thread waits for
 * I/O takes the core, and Linux's scheduler (EEVDF) lets it run out its slice, 3–7 ms, before the
 * woken measuring thread stamps the reads that arrived meanwhile (`SCHED_BATCH` keeps it only from
 * preempting). At niceness 19 the woken thread gets the core back far sooner, and the workers run
 * in the time it waits. Paced C = 256 on one core (the thread 55–65% busy, each round's 256 streams
 * ending together): with the workers yielding only below 40%, they ran 15–38 ms of each ~100 ms
 * round end (`sched_switch`) and stamps fell up to 17–29 ms behind; yielding below 90%, the ITL
 * error p99 read 4.3–7.8 ms against 6.9–10 ms in 6 alternated pairs. A thread that leaves them no
 * idle time gets them back: starved, they would let the heap grow and leave its code unoptimized.
 * Against the zero-delay server (the thread 65–70% busy, yielding now) C = 256 × 1000 tokens peaked
 * at 116–125 MB either way, C = 1024 × 200 at 120–122.
 *
 * Why idle CPUs too: a thread's low share can mean it was crowded out, not that it had room. Where
 * other processes keep every CPU busy, a worker at 19 gets almost none of it, and when the
 * measuring thread waits on it (a collection's last step, a page a sweeper holds) it waits behind
 * them all: a 2× decode win between two simulated engines, measured beside three busy loops on two
 * cores, read inconclusive 5 times in 30 with the workers yielding on share alone, against never
 * without them; its intervals were 1.3–2.6× wide in the median, against 1.2×.
 *
 * Going back to a lower niceness needs `CAP_SYS_NICE` (or an `RLIMIT_NICE` of 20): where the
 * process lacks it, {@link start} returns null and nothing changes, so no later cell is left
 * with starved workers. Linux only; `os.setPriority` on each worker's thread id, no process
 * spawned; `/proc/stat` read on libuv's pool.
 * @example
 * const yielding = await WorkerYield.start()
 * yielding?.begin() // the measured requests…
 * yielding?.end()
 */
export class WorkerYield {
  readonly #workers: ReadonlyMap<number, number>
  readonly #limits: Required<WorkerYieldLimits>
  readonly #idle: IdleCpus
  #timer: NodeJS.Timeout | null = null
  #yielding = false
  #reading = false
  #cpu: NodeJS.CpuUsage = process.threadCpuUsage()
  #at = 0

  private constructor(workers: ReadonlyMap<number, number>, limits: Required<WorkerYieldLimits>, idle: IdleCpus) {
    this.#workers = workers
    this.#limits = limits
    this.#idle = idle
  }

  /**
   * The governor of this process's V8 workers, one per process (a cell that failed mid-phase
   * leaves nothing running: the next `begin` ends it); null off Linux, without them, without
   * the right to give them their share back, or where the CPUs' idle time cannot be read. Given
   * `limits`, a governor of its own.
   */
  static start(limits?: WorkerYieldLimits): Promise<WorkerYield | null> {
    if (limits !== undefined) return WorkerYield.#create(limits)
    WorkerYield.#started ??= WorkerYield.#create({})
    return WorkerYield.#started
  }

  static #started: Promise<WorkerYield | null> | null = null

  static async #create(limits: WorkerYieldLimits): Promise<WorkerYield | null> {
    const tids = await v8WorkerTids()
    if (tids.length === 0 || !canRenice(tids[0] as number)) return null
    const idle = await IdleCpus.open()
    if (idle === null) return null
    const workers = new Map<number, number>()
    for (const tid of tids) {
      try {
        workers.set(tid, getPriority(tid))
      } catch {
        // A worker that ended since it was listed.
      }
    }
    const resolved: Required<WorkerYieldLimits> = {
      sampleMs: limits.sampleMs ?? YIELD_SAMPLE_MS,
      yieldBelowShare: limits.yieldBelowShare ?? YIELD_BELOW_SHARE,
      restoreAboveShare: limits.restoreAboveShare ?? RESTORE_ABOVE_SHARE,
      yieldWithIdleCores: limits.yieldWithIdleCores ?? YIELD_WITH_IDLE_CORES,
      restoreBelowIdleCores: limits.restoreBelowIdleCores ?? RESTORE_BELOW_IDLE_CORES,
    }
    return new WorkerYield(workers, resolved, idle)
  }

  /** Whether the workers are yielding now. */
  get yielding(): boolean {
    return this.#yielding
  }

  /** Measured requests start: the measuring thread's share and the CPUs' idle time are read from now on. */
  begin(): void {
    this.end()
    this.#cpu = process.threadCpuUsage()
    this.#at = performance.now()
    this.#idle.reset()
    void this.#idle.read()
    this.#timer = setInterval(() => void this.#sample(), this.#limits.sampleMs)
    this.#timer.unref()
  }

  /** Measured requests ended: the workers get their niceness back. */
  end(): void {
    if (this.#timer !== null) clearInterval(this.#timer)
    this.#timer = null
    if (this.#yielding) this.#renice(false)
  }

  async #sample(): Promise<void> {
    if (this.#reading) return
    const cpu = process.threadCpuUsage()
    const now = performance.now()
    const usedUs = cpu.user - this.#cpu.user + (cpu.system - this.#cpu.system)
    const share = usedUs / 1000 / Math.max(1, now - this.#at)
    this.#cpu = cpu
    this.#at = now
    const timer = this.#timer
    this.#reading = true
    try {
      const idleCores = await this.#idle.read()
      if (this.#timer === timer) this.judge({ share, idleCores })
    } finally {
      this.#reading = false
    }
  }

  /** Acts on one reading. Unknown idle time never yields, and ends a yield. */
  judge({ share, idleCores }: YieldReading): void {
    const l = this.#limits
    const roomy = idleCores !== null && idleCores >= l.yieldWithIdleCores
    const crowded = idleCores === null || idleCores < l.restoreBelowIdleCores
    if (!this.#yielding && share < l.yieldBelowShare && roomy) this.#renice(true)
    else if (this.#yielding && (share > l.restoreAboveShare || crowded)) this.#renice(false)
  }

  #renice(yielding: boolean): void {
    this.#yielding = yielding
    for (const [tid, niceness] of this.#workers) {
      try {
        setPriority(tid, yielding ? YIELDING_NICENESS : niceness)
      } catch {
        // A worker that ended; the others still change.
      }
    }
  }
}
