// `servegate demo` in a clone: the story and the real pair on this CPU, into evidence/.
import { defineConfig } from 'vitest/config'
import { servegate } from '../../src/vitest/index.ts'

export default defineConfig({
  plugins: [servegate({ evidenceDir: 'evidence', benchInclude: ['benchmarks/demo/story.bench.ts', 'benchmarks/cpu-pair.bench.ts'] })],
})
