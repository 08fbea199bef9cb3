// `node --import ./benchmarks/soak-probe.js …`: the soak's view of the JS heap inside the CLI it
// measures (RSS it reads from /proc). Every second this process's heap figures replace the file
// named by SERVEGATE_SOAK_PROBE, renamed into place so a reader never sees half of them.
import { renameSync, writeFileSync } from 'node:fs'
import { setInterval } from 'node:timers'

const path = process.env.SERVEGATE_SOAK_PROBE
if (path !== undefined) {
  setInterval(() => {
    const { heapTotal, heapUsed, external } = process.memoryUsage()
    writeFileSync(`${path}.tmp`, JSON.stringify({ heapTotal, heapUsed, external }))
    renameSync(`${path}.tmp`, path)
  }, 1000).unref()
}
