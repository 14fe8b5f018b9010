#include "visualizer/render.hpp"

#include <GLFW/glfw3.h>
#include <imgui.h>
#include <imgui_impl_glfw.h>
#include <imgui_impl_opengl3.h>
#include <stb_image_write.h>

#include <cfloat>
#include <cstdint>
#include <exception>
#include <vector>

#include "common/files.hpp"
#include "visualizer/ui/app.hpp"
#include "visualizer/ui/theme.hpp"

namespace fs::viz {

namespace {

// The few framebuffer-object entry points GL 1.1's header lacks, looked up once a context
// exists (ImGui's backend loads its own).
using GLuint_ = unsigned int;
constexpr unsigned kGlFramebuffer = 0x8D40, kGlRenderbuffer = 0x8D41, kGlColorAttachment0 = 0x8CE0,
                   kGlFramebufferComplete = 0x8CD5, kGlRgba8 = 0x8058;
struct FboApi {
  void (*GenFramebuffers)(int, GLuint_*) = nullptr;
  void (*BindFramebuffer)(unsigned, GLuint_) = nullptr;
  void (*DeleteFramebuffers)(int, const GLuint_*) = nullptr;
  void (*GenRenderbuffers)(int, GLuint_*) = nullptr;
  void (*BindRenderbuffer)(unsigned, GLuint_) = nullptr;
  void (*DeleteRenderbuffers)(int, const GLuint_*) = nullptr;
  void (*RenderbufferStorage)(unsigned, unsigned, int, int) = nullptr;
  void (*FramebufferRenderbuffer)(unsigned, unsigned, unsigned, GLuint_) = nullptr;
  unsigned (*CheckFramebufferStatus)(unsigned) = nullptr;
  bool load() {
    auto get = [](const char* n) { return glfwGetProcAddress(n); };
    GenFramebuffers = reinterpret_cast<decltype(GenFramebuffers)>(get("glGenFramebuffers"));
    BindFramebuffer = reinterpret_cast<decltype(BindFramebuffer)>(get("glBindFramebuffer"));
    DeleteFramebuffers = reinterpret_cast<decltype(DeleteFramebuffers)>(get("glDeleteFramebuffers"));
    GenRenderbuffers = reinterpret_cast<decltype(GenRenderbuffers)>(get("glGenRenderbuffers"));
    BindRenderbuffer = reinterpret_cast<decltype(BindRenderbuffer)>(get("glBindRenderbuffer"));
    DeleteRenderbuffers = reinterpret_cast<decltype(DeleteRenderbuffers)>(get("glDeleteRenderbuffers"));
    RenderbufferStorage = reinterpret_cast<decltype(RenderbufferStorage)>(get("glRenderbufferStorage"));
    FramebufferRenderbuffer = reinterpret_cast<decltype(FramebufferRenderbuffer)>(get("glFramebufferRenderbuffer"));
    CheckFramebufferStatus = reinterpret_cast<decltype(CheckFramebufferStatus)>(get("glCheckFramebufferStatus"));
    return GenFramebuffers && BindFramebuffer && DeleteFramebuffers && GenRenderbuffers && BindRenderbuffer &&
           DeleteRenderbuffers && RenderbufferStorage && FramebufferRenderbuffer && CheckFramebufferStatus;
  }
};
FboApi g_fbo;

std::string g_glfw_error;
void on_glfw_error(int, const char* what) { g_glfw_error = what ? what : "unknown GLFW error"; }

}  // namespace

Renderer::~Renderer() { shutdown(); }

bool Renderer::init(int w, int h, bool visible, bool vsync, std::string& error) {
  w_ = w;
  h_ = h;
  glfwSetErrorCallback(on_glfw_error);
  if (!glfwInit()) {
    error = "cannot open a display (" + g_glfw_error + ")";
    return false;
  }
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
  glfwWindowHint(GLFW_VISIBLE, visible ? GLFW_TRUE : GLFW_FALSE);
  window_ = glfwCreateWindow(w, h, "flashsteps — HBM ↔ SRAM replay", nullptr, nullptr);
  if (!window_) {
    error = "cannot create an OpenGL 3.3 window (" + g_glfw_error + ")";
    glfwTerminate();
    return false;
  }
  glfwMakeContextCurrent(window_);
  glfwSwapInterval(vsync ? 1 : 0);
  if (const auto* name = glGetString(GL_RENDERER)) gl_renderer_ = reinterpret_cast<const char*>(name);
  if (!g_fbo.load()) {
    error = "OpenGL framebuffer objects are unavailable";
    return false;
  }

  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;  // the layout is the app's; nothing to remember between runs
  theme::load_fonts();
  theme::apply_style();
  ImGui_ImplGlfw_InitForOpenGL(window_, true);
  ImGui_ImplOpenGL3_Init("#version 330 core");
  imgui_ready_ = true;
  return make_capture_target(error);
}

bool Renderer::make_capture_target(std::string& error) {
  g_fbo.GenFramebuffers(1, &fbo_);
  g_fbo.GenRenderbuffers(1, &color_rb_);
  g_fbo.BindRenderbuffer(kGlRenderbuffer, color_rb_);
  g_fbo.RenderbufferStorage(kGlRenderbuffer, kGlRgba8, w_, h_);
  g_fbo.BindFramebuffer(kGlFramebuffer, fbo_);
  g_fbo.FramebufferRenderbuffer(kGlFramebuffer, kGlColorAttachment0, kGlRenderbuffer, color_rb_);
  const bool ok = g_fbo.CheckFramebufferStatus(kGlFramebuffer) == kGlFramebufferComplete;
  g_fbo.BindFramebuffer(kGlFramebuffer, 0);
  if (!ok) error = "cannot create an offscreen framebuffer of the requested size";
  return ok;
}

void Renderer::shutdown() {
  if (imgui_ready_) {
    if (fbo_) g_fbo.DeleteFramebuffers(1, &fbo_);
    if (color_rb_) g_fbo.DeleteRenderbuffers(1, &color_rb_);
    fbo_ = color_rb_ = 0;
    ImGui_ImplOpenGL3_Shutdown();
    ImGui_ImplGlfw_Shutdown();
    ImGui::DestroyContext();
    imgui_ready_ = false;
  }
  if (window_) {
    glfwDestroyWindow(window_);
    window_ = nullptr;
    glfwTerminate();
  }
}

void Renderer::frame(App& app, float dt, bool offscreen) {
  if (!offscreen) glfwPollEvents();
  ImGui_ImplOpenGL3_NewFrame();
  ImGui_ImplGlfw_NewFrame();
  ImGuiIO& io = ImGui::GetIO();
  int fw = w_, fh = h_;
  if (offscreen) {
    io.DisplaySize = ImVec2(float(w_), float(h_));
    io.DisplayFramebufferScale = ImVec2(1, 1);
    io.MousePos = ImVec2(-FLT_MAX, -FLT_MAX);
  } else {
    glfwGetFramebufferSize(window_, &fw, &fh);
  }
  io.DeltaTime = dt > 0 ? dt : 1.0f / 60;
  ImGui::NewFrame();
  app.frame(dt);
  ImGui::Render();
  g_fbo.BindFramebuffer(kGlFramebuffer, offscreen ? fbo_ : 0);
  glViewport(0, 0, fw, fh);
  const ImVec4 bg = ImGui::ColorConvertU32ToFloat4(theme::kPanel);
  glClearColor(bg.x, bg.y, bg.z, 1);
  glClear(GL_COLOR_BUFFER_BIT);
  ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
  if (offscreen)
    glFinish();
  else
    glfwSwapBuffers(window_);
  g_fbo.BindFramebuffer(kGlFramebuffer, 0);
}

bool Renderer::save_png(const std::string& path, std::string& error) {
  std::vector<std::uint8_t> px(std::size_t(w_) * std::size_t(h_) * 4);
  g_fbo.BindFramebuffer(kGlFramebuffer, fbo_);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadPixels(0, 0, w_, h_, GL_RGBA, GL_UNSIGNED_BYTE, px.data());
  g_fbo.BindFramebuffer(kGlFramebuffer, 0);
  // GL's rows start at the bottom; PNG's at the top.
  std::vector<std::uint8_t> flipped(px.size());
  const std::size_t row = std::size_t(w_) * 4;
  for (int y = 0; y < h_; ++y)
    std::copy_n(&px[std::size_t(h_ - 1 - y) * row], row, &flipped[std::size_t(y) * row]);
  for (std::size_t i = 3; i < flipped.size(); i += 4) flipped[i] = 255;
  // Encoded in memory, then written whole or not at all: stbi_write_png checks no write and
  // no close, so a full disk would leave a truncated PNG behind a "wrote ...".
  std::vector<unsigned char> png;
  auto append = [](void* context, void* data, int size) {
    auto* out = static_cast<std::vector<unsigned char>*>(context);
    out->insert(out->end(), static_cast<unsigned char*>(data), static_cast<unsigned char*>(data) + size);
  };
  if (!stbi_write_png_to_func(append, &png, w_, h_, 4, flipped.data(), int(row))) {
    error = path + ": cannot encode the PNG";
    return false;
  }
  try {
    write_file_atomic(path, {{png.data(), png.size()}});
  } catch (const std::exception& e) {
    error = e.what();
    return false;
  }
  return true;
}

void Renderer::finish() { glFinish(); }

bool Renderer::should_close() const { return window_ && glfwWindowShouldClose(window_); }

}  // namespace fs::viz
