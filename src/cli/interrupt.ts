import { ServegateError } from '../errors.ts'

/** The signals a command stops on gracefully: the partial record is written, then it exits. */
export const INTERRUPT_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const
export type InterruptSignal = (typeof INTERRUPT_SIGNALS)[number]

const SIGNAL_NUMBERS: Record<InterruptSignal, number> = { SIGHUP: 1, SIGINT: 2, SIGTERM: 15 }

/**
 * The abort reason of a command stopped by a signal: which one, and the shell's exit code for it
 * (128 + its number: 130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP).
 */
export class Interrupted extends ServegateError {
  readonly signal: InterruptSignal
  readonly exitCode: number
  constructor(signal: InterruptSignal) {
    super('REQUEST_ABORTED', `interrupted by ${signal}`)
    this.signal = signal
    this.exitCode = 128 + SIGNAL_NUMBERS[signal]
  }
}

/** What interrupted an aborted signal (Ctrl-C when it says nothing else). */
export function interruption(signal: AbortSignal): Interrupted {
  return signal.reason instanceof Interrupted ? signal.reason : new Interrupted('SIGINT')
}
