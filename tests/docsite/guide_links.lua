-- Pandoc filter for tests/docsite/guide_rst.py: the operator's guide (docs/*.md, GitHub Markdown) as
-- the RST pages of the docsite. Links between the guide's pages and to their sections become Sphinx
-- :ref: roles on labels antsibull-docs accepts (ansible_collections.clusterops.slurm.docsite.<page>,
-- and <page>.<section id> for each section); links to the web stay as they are; any other relative
-- link (a file of the repository, which the docsite does not carry) is an error.
-- Metadata: page (the page's name, docs/<page>.md), pages (every page's name, comma-separated).

local PREFIX = "ansible_collections.clusterops.slurm.docsite."
local page, pages = nil, {}

local function label(name, section)
  if section == nil or section == "" then
    return PREFIX .. name
  end
  return PREFIX .. name .. "." .. section
end

local function escape(text)
  -- The text of a :ref: role ends at '<'; a backtick would end the role.
  return (text:gsub("[<>`\\]", "\\%0"))
end

local function read_meta(meta)
  page = pandoc.utils.stringify(meta.page)
  for name in pandoc.utils.stringify(meta.pages):gmatch("[^,]+") do
    pages[name] = true
  end
end

local function header(el)
  el.identifier = label(page, el.identifier)
  return el
end

local function link(el)
  local target = el.target
  if target:match("^https?://") or target:match("^mailto:") then
    return el
  end
  local name, section = target:match("^([%w_-]*)%.md#?(.*)$")
  if name == nil then
    name, section = page, target:match("^#(.+)$")
  end
  if section == nil or (name ~= page and not pages[name]) then
    error(page .. ".md: link to " .. target .. ", which is not a page of the guide nor a web address")
  end
  local text = escape(pandoc.utils.stringify(el.content))
  return pandoc.RawInline("rst", ":ref:`" .. text .. " <" .. label(name, section) .. ">`")
end

local function document(doc)
  -- The page's own label, before its title.
  table.insert(doc.blocks, 1, pandoc.RawBlock("rst", ".. _" .. label(page) .. ":"))
  return doc
end

return {
  { Meta = read_meta },
  { Header = header, Link = link },
  { Pandoc = document },
}
