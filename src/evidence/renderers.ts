import { renderCharts } from './charts.ts'
import { renderHtml } from './html.ts'
import type { Renderers } from './write.ts'

/**
 * The charts (Vega-Lite drawn to SVG) and the static page. Vega and marked are heavy, so the
 * reporter and the CLI import this module only when they render evidence.
 */
export const DEFAULT_RENDERERS: Renderers = { charts: renderCharts, html: renderHtml }
