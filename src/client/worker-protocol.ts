import type { Api, ReadBatching } from '../schema/run.ts'
import type { StreamObservation, TextCapture } from './observation.ts'

/** What a stream worker is started with: where it sends, and how (connections of its own). */
export interface WorkerSetup {
  /** Its index among the cell's workers, named in its health figures and errors. */
  worker: number
  origin: string
  api: Api
  /** The model name the bodies start with (left out of the wire digest's body hash). */
  model: string
  /** Headers on every request (`authorization`); kept in memory, never recorded. */
  headers: Record<string, string> | null
  deadlineMs: number
  /** Keep-alive connections of its pool; null for as many as it needs. */
  connections: number | null
  /** The CA (PEM) the origin's TLS certificate is verified against (`trustCa`); null for the system's CAs. */
  ca: string | null
}

/** From the cell's thread to a worker. */
export type ToWorker =
  /** Stream one request; `handedAt` is when the cell's thread handed it over (monoMs). */
  | { type: 'send'; id: number; body: Uint8Array; capture: TextCapture; handedAt: number }
  | { type: 'abort'; id: number }
  /** Open `connections` keep-alive connections (a side-effect-free GET /v1/models each). */
  | { type: 'warm'; connections: number }
  /** The measured phase starts: its CPU, event-loop delay and hand-off lags are counted from here. */
  | { type: 'measure-start' }
  | { type: 'measure-stop' }
  | { type: 'close' }

/** What one worker measured of itself over the measured phase. */
export interface WorkerMeasure {
  worker: number
  requests: number
  /** The worker thread's own CPU time, ms. */
  cpuMs: number
  /** Wall time from measure-start to measure-stop, ms. */
  wallMs: number
  eventLoopDelayP99Ms: number | null
  eventLoopDelayMaxMs: number | null
  /** Each request's hand-off lag: from the cell's thread handing it over to its bytes reaching the socket, ms. */
  handoffLagsMs: number[]
  /** Its pauses to batch reads while busy (`read-batching.ts`). */
  readBatching: ReadBatching
}

/** From a worker to the cell's thread. */
export type FromWorker =
  | { type: 'ready' }
  | { type: 'done'; id: number; obs: StreamObservation }
  | { type: 'warmed' }
  | { type: 'measured'; measure: WorkerMeasure }
  | { type: 'closed' }
