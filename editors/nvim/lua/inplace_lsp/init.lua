-- inplace-lsp for Neovim: PyTorch in-place hazards as LSP diagnostics, quickfixes and hovers.
--
-- Neovim 0.11+: `vim.lsp.enable('inplace_lsp')` (the config is in `lsp/inplace_lsp.lua`).
-- Neovim 0.10: `require('inplace_lsp').setup(opts)`, which starts the server with
-- `vim.lsp.start` for every Python buffer.

local M = {}

--- Files and directories that mark a project root (where `pyproject.toml` is read from).
M.root_markers = { 'pyproject.toml', 'setup.py', 'setup.cfg', 'requirements.txt', '.git' }

--- The `vim.lsp.Config` of the server. `opts` may set:
---   cmd      the command (default `{ 'inplace-lsp', 'server' }`)
---   select   rule codes or prefixes to enable, e.g. `{ 'IP1', 'IP3' }`
---   ignore   rule codes or prefixes to disable, e.g. `{ 'IP401' }`
--- and any other `vim.lsp.Config` field, which is passed through.
---@param opts? table
---@return vim.lsp.Config
function M.config(opts)
  opts = vim.deepcopy(opts or {})
  local settings = { select = opts.select or {}, ignore = opts.ignore or {} }
  opts.select, opts.ignore = nil, nil
  return vim.tbl_deep_extend('force', {
    cmd = { 'inplace-lsp', 'server' },
    filetypes = { 'python' },
    root_markers = M.root_markers,
    init_options = settings,
    settings = { inplaceLsp = settings },
  }, opts)
end

local function root_dir(bufnr)
  local root = vim.fs.root(bufnr, M.root_markers)
  if root then
    return root
  end
  local name = vim.api.nvim_buf_get_name(bufnr)
  return name ~= '' and vim.fs.dirname(name) or vim.uv.cwd()
end

--- Starts (or reuses) the server for every Python buffer.
--- On Neovim 0.11+ this is `vim.lsp.config` + `vim.lsp.enable`; on 0.10 an autocommand that
--- calls `vim.lsp.start`.
---@param opts? table see |inplace_lsp.config()|, plus `legacy = true` to use `vim.lsp.start`
function M.setup(opts)
  opts = vim.deepcopy(opts or {})
  -- `legacy = true` takes the 0.10 path (`vim.lsp.start`) on any version.
  local legacy = opts.legacy or vim.lsp.config == nil or vim.lsp.enable == nil
  opts.legacy = nil
  local config = M.config(opts)
  if vim.fn.executable(config.cmd[1]) ~= 1 then
    vim.notify(
      ('inplace-lsp: `%s` is not executable. Install it with `cargo install --path crates/inplace_lsp` '
        .. 'or pass its path: setup({ cmd = { "/path/to/inplace-lsp", "server" } })'):format(config.cmd[1]),
      vim.log.levels.ERROR
    )
    return
  end
  if not legacy then
    vim.lsp.config('inplace_lsp', config)
    vim.lsp.enable('inplace_lsp')
    return
  end
  local group = vim.api.nvim_create_augroup('inplace_lsp', { clear = true })
  local function start(bufnr)
    if vim.bo[bufnr].buftype ~= '' then
      return
    end
    local start_config = vim.tbl_extend('force', config, { name = 'inplace_lsp', root_dir = root_dir(bufnr) })
    start_config.filetypes, start_config.root_markers = nil, nil
    vim.lsp.start(start_config, { bufnr = bufnr })
  end
  vim.api.nvim_create_autocmd('FileType', {
    group = group,
    pattern = config.filetypes,
    callback = function(args)
      start(args.buf)
    end,
  })
  -- Buffers already open when setup() runs.
  for _, bufnr in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(bufnr) and vim.tbl_contains(config.filetypes, vim.bo[bufnr].filetype) then
      start(bufnr)
    end
  end
end

return M
