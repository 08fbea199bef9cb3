/** The streams a command writes to; tests pass buffers. `isTTY` decides whether progress is drawn. */
export interface CliIo {
  stdout: NodeJS.WritableStream & { isTTY?: boolean }
  stderr: NodeJS.WritableStream & { isTTY?: boolean }
}
