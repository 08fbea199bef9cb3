import { execFile } from 'node:child_process'
import { readdir, readFile } from 'node:fs/promises'

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
